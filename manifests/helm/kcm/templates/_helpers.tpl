{{/*
kcm.objects: the objects of one of the kustomize tree's files (FILE, a path
under files/), parsed, as YAML of {"items": [...]}. Comment-only documents
are left out; a document that does not parse fails the render.
*/}}
{{- define "kcm.objects" -}}
{{- $items := list -}}
{{- $text := .root.Files.Get (printf "files/%s" .file) -}}
{{- if not $text -}}
{{- fail (printf "files/%s is missing or empty" .file) -}}
{{- end -}}
{{- range regexSplit "(?m)^---(?:[ \t].*)?\r?$" $text -1 -}}
{{- if regexMatch "(?m)^(---|\\.\\.\\.)" . -}}
{{- fail (printf "files/%s: a document marker the chart does not split at" $.file) -}}
{{- end -}}
{{- $o := fromYaml . -}}
{{- if hasKey $o "Error" -}}
{{- fail (printf "files/%s: %s" $.file $o.Error) -}}
{{- end -}}
{{- if $o.kind -}}
{{- $items = append $items $o -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "items" $items) -}}
{{- end -}}

{{/*
kcm.replace: ARGS with the one element OLD replaced by NEW; fails when OLD
is not there, as kustomize's replacements and patches do.
*/}}
{{- define "kcm.replace" -}}
{{- if not (has .old .args) -}}
{{- fail (printf "%s: no argument %s to replace" .what .old) -}}
{{- end -}}
{{- $out := list -}}
{{- range .args -}}
{{- $out = append $out (ternary $.new . (eq . $.old)) -}}
{{- end -}}
{{- toYaml (dict "items" $out) -}}
{{- end -}}

{{/*
kcm.emit: ROOT's values written into the objects of FILES, as kustomize's
components write the parameters (base/image, base/lease-name), each object
then printed as a YAML document. EDIT, when given, names a template that
changes the object further (it gets root and object).
*/}}
{{- define "kcm.emit" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $image := printf "%s:%s" $v.image.repository (default $root.Chart.AppVersion $v.image.tag) -}}
{{- $lease := printf "--leader-elect-resource-name=%s" $v.leaseName -}}
{{- range .files -}}
{{- $file := . -}}
{{- range (include "kcm.objects" (dict "root" $root "file" $file) | fromYaml).items -}}
{{- $o := . -}}
{{- if and (eq $o.kind "Role") (eq $o.metadata.name "kcm-leader-election") -}}
{{- range $o.rules -}}
{{- if has "update" .verbs -}}
{{- $_ := set . "resourceNames" (list $v.leaseName) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if has $o.kind (list "Pod" "DaemonSet" "Deployment") -}}
{{- $spec := ternary $o.spec (dig "spec" "template" "spec" dict $o) (eq $o.kind "Pod") -}}
{{- range $spec.containers -}}
{{- if eq .name "kcm" -}}
{{- $_ := set . "image" $image -}}
{{- $args := include "kcm.replace" (dict "what" $file "args" .args "old" "--leader-elect-resource-name=kcm" "new" $lease) | fromYaml -}}
{{- $_ := set . "args" $args.items -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $.edit -}}
{{- include $.edit (dict "root" $root "object" $o) -}}
{{- end }}
---
{{ toYaml $o }}
{{- end -}}
{{- end -}}
{{- end -}}
