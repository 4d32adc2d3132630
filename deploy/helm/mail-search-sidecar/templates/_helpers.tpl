{{/* Names. */}}
{{- define "sidecar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sidecar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sidecar.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: (dict "root" $ "role" "api"). */}}
{{- define "sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sidecar.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{/* ServiceAccount name of an IAM role (tailer, workers, api, backfill, operator). */}}
{{- define "sidecar.serviceAccountName" -}}
{{- $sa := index .root.Values.serviceAccounts .iam -}}
{{- default (printf "%s-%s" (include "sidecar.fullname" .root) .iam) $sa.name -}}
{{- end -}}

{{- define "sidecar.configName" -}}{{ include "sidecar.fullname" . }}-config{{- end -}}

{{- define "sidecar.secretName" -}}
{{- default (printf "%s-secrets" (include "sidecar.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* An image reference: (dict "root" $ "slim" true|false). The slim image only where the
role may use it and one is configured; digest before tag. */}}
{{- define "sidecar.image" -}}
{{- $img := .root.Values.image -}}
{{- if and .slim .root.Values.slimImage.repository -}}
{{- $img = .root.Values.slimImage -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .root.Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* The checks the schema cannot express: run by every template that uses the settings. */}}
{{- define "sidecar.validate" -}}
{{- $secretKeys := list "SIDECAR_API_TOKENS" "SIDECAR_CURSOR_KEY" "SIDECAR_OPENSEARCH_PASSWORD" "SIDECAR_QDRANT_API_KEY" "SIDECAR_AWS_ROLE_EXTERNAL_ID" -}}
{{- $chartKeys := list "SIDECAR_API_HOST" "SIDECAR_API_PORT" "SIDECAR_API_METRICS_PORT" "SIDECAR_METRICS_HOST" "SIDECAR_METRICS_PORT" -}}
{{- range $key, $value := .Values.config -}}
{{- if has $key $secretKeys -}}
{{- fail (printf "config.%s is a secret setting: put it in secrets.values or secrets.existingSecret, never in the ConfigMap" $key) -}}
{{- end -}}
{{- if has $key $chartKeys -}}
{{- fail (printf "config.%s is set by the chart (metrics.* and the API's ports); remove it" $key) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.config.SIDECAR_QDRANT_URL -}}
{{- fail "config.SIDECAR_QDRANT_URL is required: the embedded Qdrant store admits one process and needs a writable disk" -}}
{{- end -}}
{{- range $key, $_ := .Values.secrets.values -}}
{{- if not (regexMatch "^SIDECAR_[A-Z0-9_]+$" $key) -}}
{{- fail (printf "secrets.values.%s: keys are SIDECAR_* setting names" $key) -}}
{{- end -}}
{{- end -}}
{{- range $role := list "tailer" "fulltext" "vectors" "api" -}}
{{- $pdb := (index $.Values $role).pdb -}}
{{- if and $pdb.enabled (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "invalid" $pdb.maxUnavailable)) -}}
{{- fail (printf "%s.pdb: set minAvailable or maxUnavailable, not both" $role) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tailer.enabled (gt (int .Values.tailer.renewSeconds) (div (int .Values.tailer.leaseSeconds) 2)) -}}
{{- fail "tailer.renewSeconds must be at most half of tailer.leaseSeconds (a renewal missed must not lose the lease)" -}}
{{- end -}}
{{- end -}}

{{/* The secret keys a role's container reads (each optional: an absent key is not set). */}}
{{- define "sidecar.secretEnv" -}}
{{- $keys := list "SIDECAR_REDIS_URL" "SIDECAR_OPENSEARCH_PASSWORD" "SIDECAR_QDRANT_API_KEY" "SIDECAR_AWS_ROLE_EXTERNAL_ID" -}}
{{- if eq .role "api" -}}
{{- $keys = concat $keys (list "SIDECAR_API_TOKENS" "SIDECAR_CURSOR_KEY") -}}
{{- end -}}
{{- range $keys }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sidecar.secretName" $.root }}
      key: {{ . }}
      optional: true
{{- end -}}
{{- end -}}

{{/* Writable scratch space under a read-only root. */}}
{{- define "sidecar.scratchVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratchSizeLimit }}
- name: cache
  emptyDir:
    sizeLimit: {{ .Values.scratchSizeLimit }}
- name: state
  emptyDir:
    sizeLimit: {{ .Values.scratchSizeLimit }}
{{- end -}}

{{- define "sidecar.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: cache
  mountPath: /home/sidecar/.cache
- name: state
  mountPath: /home/sidecar/.sidecar
{{- end -}}

{{/* A Job's / CronJob's pod spec: (dict "root" $ "iam" "operator" "role" "init" "command" (list ...) "cfg" .Values.init "inlineConfig" <bool: a hook running before the ConfigMap exists>). */}}
{{- define "sidecar.jobPod" -}}
{{- $root := .root -}}
serviceAccountName: {{ include "sidecar.serviceAccountName" (dict "root" $root "iam" .iam) }}
automountServiceAccountToken: false
restartPolicy: Never
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: {{ .role }}
    image: {{ include "sidecar.image" (dict "root" $root "slim" .cfg.slim) }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    command:
      {{- toYaml .command | nindent 6 }}
    {{- if .inlineConfig }}
    env:
      {{- range $key, $value := $root.Values.config }}
      {{- if ne (toString $value) "" }}
      - name: {{ $key }}
        value: {{ toString $value | quote }}
      {{- end }}
      {{- end }}
      {{- include "sidecar.secretEnv" (dict "root" $root "role" .role) | nindent 6 }}
      {{- with $root.Values.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- else }}
    envFrom:
      - configMapRef:
          name: {{ include "sidecar.configName" $root }}
    env:
      {{- include "sidecar.secretEnv" (dict "root" $root "role" .role) | nindent 6 }}
      {{- with $root.Values.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- end }}
    resources:
      {{- toYaml .cfg.resources | nindent 6 }}
    securityContext:
      {{- toYaml $root.Values.securityContext | nindent 6 }}
    volumeMounts:
      {{- include "sidecar.scratchMounts" $root | nindent 6 }}
volumes:
  {{- include "sidecar.scratchVolumes" $root | nindent 2 }}
{{- end -}}
