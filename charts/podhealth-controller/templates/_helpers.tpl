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

{{/* "--name=value" when the value is set (not null), else nothing. */}}
{{- define "podhealth-controller.flag" -}}
{{- if not (kindIs "invalid" .value) }}
- --{{ .name }}={{ .value }}
{{- end }}
{{- end }}
