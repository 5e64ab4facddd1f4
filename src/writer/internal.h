/* writer/internal.h — what the writer's files share. */
#ifndef KCM_WRITER_INTERNAL_H
#define KCM_WRITER_INTERNAL_H

#include "kcm/writer.h"

/* Send req, a patch, as GET + the patch applied here + PUT (update.c). */
int kcm_writer_send_as_update(struct kcm_writer *w, const struct kcm_write *req,
                              kcm_client_done_cb done, void *data);

#endif
