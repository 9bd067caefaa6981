{{/*
Names, labels and the pieces several templates share.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "mcpgw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The objects' name: fullnameOverride, else the release's name when it contains the chart's name,
else "<release>-<name>"; cut to the 63 characters Kubernetes allows in a name.
*/}}
{{- define "mcpgw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "mcpgw.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<chart>-<version>", for the helm.sh/chart label. */}}
{{- define "mcpgw.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that select the pods: they never change between upgrades. */}}
{{- define "mcpgw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "mcpgw.labels" -}}
helm.sh/chart: {{ include "mcpgw.chart" . }}
{{ include "mcpgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The ServiceAccount the pods run as. */}}
{{- define "mcpgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mcpgw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret the pods read: the operator's own, or the one this chart makes. */}}
{{- define "mcpgw.secretName" -}}
{{- default (include "mcpgw.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The image reference: repository and tag, the tag defaulting to the chart's appVersion. */}}
{{- define "mcpgw.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where the Secret's files are mounted, and the files the configuration names. */}}
{{- define "mcpgw.secretDir" -}}/run/secrets/mcpgw{{- end -}}

{{/*
Every Host name the gateway answers besides addresses: the Service's names in the cluster,
the ingress hosts, and allowedHosts.
*/}}
{{- define "mcpgw.allowedHosts" -}}
{{- $name := include "mcpgw.fullname" . -}}
{{- $namespace := .Release.Namespace -}}
{{- $hosts := list $name (printf "%s.%s" $name $namespace) (printf "%s.%s.svc" $name $namespace) (printf "%s.%s.svc.cluster.local" $name $namespace) -}}
{{- if .Values.ingress.enabled -}}
{{- $hosts = concat $hosts .Values.ingress.hosts -}}
{{- end -}}
{{- $hosts = concat $hosts .Values.allowedHosts | uniq -}}
{{- toJson $hosts -}}
{{- end -}}

{{/*
gateway.yaml: the `gateway` values with what the chart owns added: the store, the cluster's
shared secret, allowed_hosts and the Redis rate limits. Refuses values that set those
themselves, naming the value to set instead.
*/}}
{{- define "mcpgw.gatewayConfig" -}}
{{- $gateway := deepCopy (default dict .Values.gateway) -}}
{{- $cluster := default dict $gateway.cluster -}}
{{- $rateLimit := default dict $gateway.rate_limit -}}
{{- $auth := default dict $gateway.auth -}}
{{- $owned := dict
      "store" (list (hasKey $gateway "store") "store.url, store.maxConnections and secrets.postgresPassword")
      "cluster.secret_file" (list (hasKey $cluster "secret_file") "secrets.sessionKey")
      "allowed_hosts" (list (hasKey $gateway "allowed_hosts") "allowedHosts (or ingress.hosts)")
      "rate_limit.backend" (list (hasKey $rateLimit "backend") "redis.enabled")
      "rate_limit.redis" (list (hasKey $rateLimit "redis") "redis.onUnavailable and secrets.redisUrl") -}}
{{- range $key, $found := $owned -}}
{{- if index $found 0 -}}
{{- fail (printf "gateway.%s: the chart writes this itself; set %s instead" $key (index $found 1)) -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $auth "enabled") (not $auth.enabled) -}}
{{- fail "gateway.auth.enabled: must stay true; the pods listen on every address, which the gateway refuses with authentication off" -}}
{{- end -}}
{{- if .Values.redis.enabled -}}
{{- $_ := set $rateLimit "backend" "redis" -}}
{{- $_ := set $rateLimit "redis" (dict "url" "${MCPGW_REDIS_URL}" "on_unavailable" .Values.redis.onUnavailable) -}}
{{- end -}}
{{- if $rateLimit -}}
{{- $_ := set $gateway "rate_limit" $rateLimit -}}
{{- end -}}
{{- $secretDir := include "mcpgw.secretDir" . -}}
{{- $_ := set $gateway "store" (dict "url" .Values.store.url "password_file" (printf "%s/postgres-password" $secretDir) "max_connections" .Values.store.maxConnections) -}}
{{- $_ := set $cluster "secret_file" (printf "%s/session-key" $secretDir) -}}
{{- $_ := set $gateway "cluster" $cluster -}}
{{- $_ := set $gateway "allowed_hosts" (include "mcpgw.allowedHosts" . | fromJsonArray) -}}
{{- /* Quoted, so that the URL's expansion is escaped whatever characters it holds. */ -}}
{{- toYaml $gateway | replace "${MCPGW_REDIS_URL}" "\"${MCPGW_REDIS_URL}\"" -}}
{{- end -}}
