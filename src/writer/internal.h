/* writer/internal.h — what the writer's files share. */
#ifndef KCM_WRITER_INTERNAL_H
#define KCM_WRITER_INTERNAL_H

#include "kcm/writer.h"

#include <json-c/json.h>

#include "kcm/buf.h"

/* Send req, a patch, as GET + the patch applied here + PUT (update.c). */
int kcm_writer_send_as_update(struct kcm_writer *w, const struct kcm_write *req,
                              kcm_client_done_cb done, void *data);

/* The object text (len bytes) with the merge patch applied, into out,
 * without parsing the object whole: for a patch of status and, in
 * metadata, a resourceVersion (which must equal the object's) and
 * annotations, the only merge patches kcm sends as updates. The members
 * it touches are replaced in the text; the rest (a Deployment's 50,000
 * annotations) is copied. 0; KCM_ECONFLICT when the resourceVersions
 * differ; KCM_WRITER_WHOLE for another patch or a text it cannot read (apply
 * it whole instead); KCM_ENOMEM. */
#define KCM_WRITER_WHOLE 1
int kcm_writer_splice_merge(const char *text, size_t len, struct json_object *patch,
                            struct kcm_buf *out);

#endif
