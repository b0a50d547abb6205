{{/* The recommended labels every object carries. */}}
{{- define "podhealth-controller.labels" -}}
app.kubernetes.io/name: podhealth-controller
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: podhealth
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The image: by digest when one is given, else by tag. */}}
{{- define "podhealth-controller.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end }}

{{/* "--name=value" when the value is set (not null), else nothing;
quoted, so that a selector's spaces and commas stay one argument. With
"int", the value is written as an integer: values files give numbers as
floats, which would print 1e+06. */}}
{{- define "podhealth-controller.flag" -}}
{{- if not (kindIs "invalid" .value) }}
- {{ printf "--%s=%v" .name (ternary (int64 .value) .value (hasKey . "int")) | quote }}
{{- end }}
{{- end }}
