{{/* Chart name, shortened to a DNS label. */}}
{{- define "ndtrace.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: RELEASE-NAME, or RELEASE when it already contains the chart name. */}}
{{- define "ndtrace.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ndtrace.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every resource, without the component. */}}
{{- define "ndtrace.baseLabels" -}}
helm.sh/chart: {{ include "ndtrace.chart" . }}
app.kubernetes.io/name: {{ include "ndtrace.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ndtrace
{{- end }}

{{/* Labels of the worker resources. */}}
{{- define "ndtrace.labels" -}}
{{ include "ndtrace.baseLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{/* Labels that select the worker pods. */}}
{{- define "ndtrace.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ndtrace.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "ndtrace.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ndtrace.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ndtrace.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Arguments after `ndtrace worker`. */}}
{{- define "ndtrace.workerArgs" -}}
- --temporal={{ required "temporal.address is required" .Values.temporal.address }}
- --namespace={{ .Values.temporal.namespace }}
- --queues={{ .Values.worker.queues }}
- --trace-concurrency={{ int .Values.worker.traceConcurrency }}
- --io-concurrency={{ int .Values.worker.ioConcurrency }}
- --backend={{ .Values.worker.backend }}
- --log-format=json
- --scratch=/var/lib/ndtrace/scratch
{{- with .Values.worker.timeout }}
- --timeout={{ . }}
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics-addr=:{{ int .Values.metrics.port }}
{{- end }}
{{- range .Values.worker.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Storage credentials and other environment of the worker container. */}}
{{- define "ndtrace.env" -}}
{{- if .Values.worker.debug }}
- name: NDTRACE_LOG
  value: debug
{{- end }}
{{- with .Values.storage.existingSecret }}
{{- $secret := . }}
{{- if not $.Values.storage.envFromSecret }}
{{- range $var, $key := $.Values.storage.secretEnv }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      {{- if $.Values.storage.optionalKeys }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- if $.Values.storage.gcpCredentialsKey }}
- name: GOOGLE_APPLICATION_CREDENTIALS
  value: /var/run/secrets/ndtrace/gcp/{{ $.Values.storage.gcpCredentialsKey }}
{{- end }}
{{- end }}
{{- range $name, $value := .Values.storage.env }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
