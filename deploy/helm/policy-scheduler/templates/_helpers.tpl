{{/* The name of every object of the release (cluster-scoped ones too, so two releases do not collide). */}}
{{- define "policy-scheduler.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "policy-scheduler.selector" -}}
app.kubernetes.io/name: policy-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "policy-scheduler.labels" -}}
{{ include "policy-scheduler.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The ConfigMap a profile reads, or nothing (pod specs only). */}}
{{- define "policy-scheduler.configmap" -}}
{{- if .profile.existingConfigMap -}}
{{ .profile.existingConfigMap }}
{{- else if .profile.policies -}}
{{ include "policy-scheduler.fullname" .root }}-{{ .profile.name }}-policies
{{- end -}}
{{- end -}}
