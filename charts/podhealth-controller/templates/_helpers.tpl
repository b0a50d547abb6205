{{/* The name in app.kubernetes.io/name and the selectors: nameOverride,
else the chart's. */}}
{{- define "podhealth-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The name of every object, and the prefix of the names of the rest:
fullnameOverride; else the release's name when it holds the name, else
RELEASE-NAME. Cut to 55 characters, so that the metrics Service's name
(FULLNAME-metrics) stays a DNS label. */}}
{{- define "podhealth-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- $name := include "podhealth-controller.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the controller runs as: serviceAccount.name, else
the full name. */}}
{{- define "podhealth-controller.serviceAccountName" -}}
{{- default (include "podhealth-controller.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The recommended labels every object carries. */}}
{{- define "podhealth-controller.labels" -}}
app.kubernetes.io/name: {{ include "podhealth-controller.name" . }}
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

{{/* The nanoseconds in a Go duration such as 1m30s or 500ms (the schema
has checked its form), as a float that holds them exactly (up to 2^53 ns,
104 days), each part cut to whole nanoseconds as Go's ParseDuration cuts
it. */}}
{{- define "podhealth-controller.nanoseconds" -}}
{{- $units := dict "h" 3600000000000.0 "m" 60000000000.0 "s" 1000000000.0 "ms" 1000000.0 "us" 1000.0 "ns" 1.0 }}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ms|us|ns|h|m|s)" . -1 }}
{{- $unit := regexFind "(ms|us|ns|h|m|s)$" . }}
{{- $total = addf $total (floor (mulf (float64 (trimSuffix $unit .)) (get $units $unit))) }}
{{- end }}
{{- $total }}
{{- end }}

{{/* Fails on leader-election timings the controller refuses, as
client-go's leader election does: the lease must outlast the renew
deadline, and the renew deadline 1.2 retry periods. */}}
{{- define "podhealth-controller.checkLeaderElection" -}}
{{- $le := .Values.leaderElection }}
{{- $lease := include "podhealth-controller.nanoseconds" ($le.leaseDuration | default "15s") | float64 }}
{{- $renew := include "podhealth-controller.nanoseconds" ($le.renewDeadline | default "10s") | float64 }}
{{- $retry := include "podhealth-controller.nanoseconds" ($le.retryPeriod | default "2s") | float64 }}
{{- if le $lease $renew }}
{{- fail (printf "leaderElection: leaseDuration (%s) must be longer than renewDeadline (%s)" ($le.leaseDuration | default "15s, the default") ($le.renewDeadline | default "10s, the default")) }}
{{- end }}
{{- if le $renew (floor (mulf $retry 1.2)) }}
{{- fail (printf "leaderElection: renewDeadline (%s) must be longer than 1.2 times retryPeriod (%s)" ($le.renewDeadline | default "10s, the default") ($le.retryPeriod | default "2s, the default")) }}
{{- end }}
{{- end }}
