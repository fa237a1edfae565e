{{/* Names, labels and checks shared by the templates. */}}

{{/* The chart name, or nameOverride. */}}
{{- define "betcode-relay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: fullnameOverride, else the release name with the chart name. */}}
{{- define "betcode-relay.fullname" -}}
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

{{/* Labels that select the relay's pods: never change them in an upgrade. */}}
{{- define "betcode-relay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "betcode-relay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "betcode-relay.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "betcode-relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: betcode
{{- end -}}

{{- define "betcode-relay.tlsSecret" -}}
{{- default (printf "%s-tls" (include "betcode-relay.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{- define "betcode-relay.caSecret" -}}
{{- default (printf "%s-ca" (include "betcode-relay.fullname" .)) .Values.ca.secretName -}}
{{- end -}}

{{- define "betcode-relay.databaseSecret" -}}
{{- default (printf "%s-database" (include "betcode-relay.fullname" .)) .Values.database.secretName -}}
{{- end -}}

{{- define "betcode-relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "betcode-relay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Seconds the kubelet waits after the preStop hook starts: the pause, the drain and the
     shutdown after it. */}}
{{- define "betcode-relay.terminationGracePeriodSeconds" -}}
{{- add (int .Values.lifecycle.preStopSleepSeconds) (int .Values.relay.drainGraceSeconds) (int .Values.lifecycle.shutdownMarginSeconds) -}}
{{- end -}}

{{/* Refuse values that cannot work, with the key to fix. */}}
{{- define "betcode-relay.validate" -}}
{{- if and (not .Values.autoscaling.enabled) (lt (int .Values.replicaCount) 2) -}}
{{- fail "replicaCount must be at least 2: a draining or failed replica's agents need another to reconnect to" -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.minReplicas) 2) -}}
{{- fail "autoscaling.minReplicas must be at least 2" -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) -}}
{{- fail "autoscaling.maxReplicas must be at least autoscaling.minReplicas" -}}
{{- end -}}
{{- if lt (int .Values.relay.drainGraceSeconds) 1 -}}
{{- fail "relay.drainGraceSeconds must be at least 1" -}}
{{- end -}}
{{- if lt (int .Values.lifecycle.shutdownMarginSeconds) 10 -}}
{{- fail "lifecycle.shutdownMarginSeconds must be at least 10: the relay closes its listeners and store after the drain" -}}
{{- end -}}
{{- if and .Values.tls.create (or (not .Values.tls.cert) (not .Values.tls.key)) -}}
{{- fail "tls.create needs tls.cert and tls.key (--set-file tls.cert=relay.crt --set-file tls.key=relay.key)" -}}
{{- end -}}
{{- if and .Values.ca.create (not .Values.ca.cert) -}}
{{- fail "ca.create needs ca.cert (--set-file ca.cert=ca.crt)" -}}
{{- end -}}
{{- if and .Values.ca.create .Values.ca.keyKey (not .Values.ca.key) -}}
{{- fail "ca.create with ca.keyKey needs ca.key (--set-file ca.key=ca.key)" -}}
{{- end -}}
{{- if and .Values.database.create (not .Values.database.url) -}}
{{- fail "database.create needs database.url" -}}
{{- end -}}
{{- if not (has .Values.relay.logFormat (list "text" "json")) -}}
{{- fail "relay.logFormat must be text or json" -}}
{{- end -}}
{{- end -}}
