{{/*
Names, labels, the settings check (files/settings.yaml, generated from server/settings.ts) and the pod parts the
gateway and worker Deployments share.
*/}}

{{- define "lucent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "lucent.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one role: (dict "ctx" $ "role" "gateway") */}}
{{- define "lucent.selector" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "lucent.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "lucent.secretName" -}}
{{ .Values.existingSecret | default (printf "%s-secrets" (include "lucent.fullname" .)) }}
{{- end -}}

{{- define "lucent.serviceAccountName" -}}
{{ .Values.serviceAccount.name | default (include "lucent.fullname" .) }}
{{- end -}}

{{/* The settings the service reads (name -> type, default, secret, chart). */}}
{{- define "lucent.settings" -}}
{{ .Files.Get "files/settings.yaml" }}
{{- end -}}

{{/*
Fails on a values mistake that would give pods that cannot start or lose data: an unknown setting name, a
credential in the ConfigMap, a setting the chart sets itself, a scale-out without the shared queue, store or storage.
*/}}
{{- define "lucent.validate" -}}
{{- $known := (include "lucent.settings" . | fromYaml).settings -}}
{{- if not $known }}{{ fail "files/settings.yaml is missing or empty: run node --import tsx scripts/helm-settings.ts" }}{{ end -}}
{{- if or (hasKey .Values.config "LUCENT_DRAIN_GRACE_MS") (hasKey .Values.secrets "LUCENT_DRAIN_GRACE_MS") }}{{ fail "config.LUCENT_DRAIN_GRACE_MS: set gateway.drainGraceSeconds and worker.drainGraceSeconds instead (they also size terminationGracePeriodSeconds)" }}{{ end -}}
{{- range $name, $v := .Values.config -}}
{{- $s := get $known $name -}}
{{- if not $s }}{{ fail (printf "config.%s is not a Lucent setting (server/settings.ts; docs/configuration.md)" $name) }}{{ end -}}
{{- if $s.secret }}{{ fail (printf "config.%s is a credential: put it in secrets (or existingSecret), not the ConfigMap" $name) }}{{ end -}}
{{- if $s.chart }}{{ fail (printf "config.%s is set by the chart per Deployment (see values.yaml: worker.concurrency, image, ...)" $name) }}{{ end -}}
{{- if or (kindIs "map" $v) (kindIs "slice" $v) }}{{ fail (printf "config.%s must be a string, number or boolean" $name) }}{{ end -}}
{{- end -}}
{{- range $name, $v := .Values.secrets -}}
{{- $s := get $known $name -}}
{{- if not $s }}{{ fail (printf "secrets.%s is not a Lucent setting (server/settings.ts; docs/configuration.md)" $name) }}{{ end -}}
{{- if $s.chart }}{{ fail (printf "secrets.%s is set by the chart per Deployment" $name) }}{{ end -}}
{{- end -}}
{{- if not .Values.existingSecret -}}
{{- if not .Values.secrets.LUCENT_REDIS_URL }}{{ fail "secrets.LUCENT_REDIS_URL is required (gateways and workers share a Redis queue), or name a Secret holding it in existingSecret" }}{{ end -}}
{{- if not .Values.allowEmbeddedStore -}}
{{- if not .Values.secrets.LUCENT_DATABASE_URL }}{{ fail "secrets.LUCENT_DATABASE_URL is required: pods on several hosts share keys, jobs and coins through PostgreSQL (allowEmbeddedStore=true for a trial without it)" }}{{ end -}}
{{- if not .Values.config.LUCENT_S3_ENDPOINT }}{{ fail "config.LUCENT_S3_ENDPOINT (+ LUCENT_S3_BUCKET and the S3 keys in secrets) is required: pods share media through S3 (allowEmbeddedStore=true for a trial without it)" }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.config.LUCENT_S3_ENDPOINT (not .Values.config.LUCENT_S3_BUCKET) }}{{ fail "config.LUCENT_S3_BUCKET is required with LUCENT_S3_ENDPOINT" }}{{ end -}}
{{- end -}}

{{/* The env of the drain grace (ms) for one role: (dict "ctx" $ "seconds" N) */}}
{{- define "lucent.drainEnv" -}}
- name: LUCENT_DRAIN_GRACE_MS
  value: {{ mul (int .seconds) 1000 | toString | quote }}
{{- end -}}

{{/* env and volumes both roles share */}}
{{- define "lucent.commonEnv" -}}
- name: HOST
  value: "0.0.0.0"
- name: DATA_DIR
  value: /data
- name: TMPDIR
  value: /tmp
- name: XDG_CACHE_HOME
  value: /data/cache
- name: HOME
  value: /data
{{- end -}}

{{/* the serving containers' own listener settings */}}
{{- define "lucent.metricsEnv" -}}
{{- if gt (int .Values.metrics.port) 0 }}
- name: LUCENT_METRICS_PORT
  value: {{ .Values.metrics.port | toString | quote }}
{{- end }}
{{- end -}}

{{/* (dict "ctx" $ "port" N) */}}
{{- define "lucent.ports" -}}
- {name: http, containerPort: {{ .port }}, protocol: TCP}
{{- if gt (int .ctx.Values.metrics.port) 0 }}
- {name: metrics, containerPort: {{ .ctx.Values.metrics.port }}, protocol: TCP}
{{- end }}
{{- end -}}

{{- define "lucent.envFrom" -}}
- configMapRef:
    name: {{ include "lucent.fullname" . }}-config
- secretRef:
    name: {{ include "lucent.secretName" . }}
{{- end -}}

{{- define "lucent.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: http}
  {{- toYaml .Values.probes.startup | nindent 2 }}
livenessProbe:
  httpGet: {path: /healthz, port: http}
  {{- toYaml .Values.probes.liveness | nindent 2 }}
readinessProbe:
  httpGet: {path: /readyz, port: http}
  {{- toYaml .Values.probes.readiness | nindent 2 }}
{{- end -}}

{{- define "lucent.podSpecCommon" -}}
serviceAccountName: {{ include "lucent.serviceAccountName" . }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "lucent.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- if and .Values.metrics.scrapeAnnotations (gt (int .Values.metrics.port) 0) }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | toString | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* Seconds of work in the queue (see values.yaml worker.keda): the ETA model's estimate of the queued and running
     jobs (lucent_queue_backlog_seconds, the same on every process, hence max) + fallbackJobSeconds per job whose
     model has no measured speed yet. */}}
{{- define "lucent.backlogQuery" -}}
{{- $k := .Values.worker.keda -}}
max(lucent_queue_backlog_seconds) + {{ $k.fallbackJobSeconds }} * max(lucent_queue_backlog_unestimated_jobs)
{{- end -}}
