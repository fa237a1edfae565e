package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// chart is the relay's Helm chart.
var chart = filepath.Join(repo, "deploy", "helm", "betcode-relay")

// kubeVersion is the Kubernetes version the chart is rendered for: the
// one k8s.io/api in go.mod describes.
const kubeVersion = "1.37.0"

// rendered is a rendered chart, decoded strictly into the API types.
type rendered struct {
	text     string
	deploy   *appsv1.Deployment
	services map[string]*corev1.Service
	secrets  map[string]*corev1.Secret
	pdb      *policyv1.PodDisruptionBudget
	hpa      *autoscalingv2.HorizontalPodAutoscaler
	monitor  *monitoringv1.ServiceMonitor
	account  *corev1.ServiceAccount
}

// renderChart runs helm template with the values files (in testdata) and
// --set pairs.
func renderChart(t *testing.T, valuesFiles []string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", "relay", chart, "--namespace", "betcode", "--kube-version", kubeVersion}
	for _, f := range valuesFiles {
		args = append(args, "--values", filepath.Join("testdata", f))
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return run(t, helmBin(t), args...)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits helm's output into objects and decodes each strictly (an
// unknown field is an error) into its API type.
func decode(t *testing.T, text string) *rendered {
	t.Helper()
	r := &rendered{text: text, services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}}
	for _, doc := range docSep.Split(text, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("rendered object: %v\n%s", err, doc)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			if r.deploy != nil {
				t.Fatalf("two Deployments")
			}
			r.deploy = &appsv1.Deployment{}
			obj = r.deploy
		case "v1 Service":
			s := &corev1.Service{}
			obj = s
			defer func() { r.services[s.Name] = s }()
		case "v1 Secret":
			s := &corev1.Secret{}
			obj = s
			defer func() { r.secrets[s.Name] = s }()
		case "v1 ServiceAccount":
			r.account = &corev1.ServiceAccount{}
			obj = r.account
		case "policy/v1 PodDisruptionBudget":
			r.pdb = &policyv1.PodDisruptionBudget{}
			obj = r.pdb
		case "autoscaling/v2 HorizontalPodAutoscaler":
			r.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
			obj = r.hpa
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.monitor = &monitoringv1.ServiceMonitor{}
			obj = r.monitor
		default:
			t.Fatalf("unexpected object %s %s in the chart", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v\n%s", tm.Kind, err, doc)
		}
	}
	if r.deploy == nil {
		t.Fatalf("no Deployment in the chart")
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// chartCases are the sets of values the chart is rendered and checked with.
var chartCases = []struct {
	name   string
	values []string // files in testdata
	set    []string
	check  func(t *testing.T, r *rendered)
}{
	{name: "defaults", check: func(t *testing.T, r *rendered) {
		if r.hpa != nil || r.monitor != nil {
			t.Errorf("HPA or ServiceMonitor rendered by default")
		}
		if r.pdb == nil {
			t.Errorf("no PodDisruptionBudget by default")
		}
		if got := *r.deploy.Spec.Replicas; got != 3 {
			t.Errorf("replicas %d, want the default 3", got)
		}
		// GOMAXPROCS follows the CPU request (rounded up by the kubelet).
		c := r.deploy.Spec.Template.Spec.Containers[0]
		if e := envVar(c, "GOMAXPROCS"); e == nil || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
			e.ValueFrom.ResourceFieldRef.Resource != "requests.cpu" {
			t.Errorf("GOMAXPROCS %+v, want it from resources.requests.cpu", e)
		}
	}},
	{name: "GOMAXPROCS set", set: []string{"relay.goMaxProcs=4"}, check: func(t *testing.T, r *rendered) {
		if got := env(r.deploy.Spec.Template.Spec.Containers[0], "GOMAXPROCS"); got != "4" {
			t.Errorf("GOMAXPROCS %q, want 4", got)
		}
	}},
	{name: "autoscaled", set: []string{"autoscaling.enabled=true", "autoscaling.minReplicas=3", "autoscaling.maxReplicas=8"}, check: func(t *testing.T, r *rendered) {
		if r.hpa == nil {
			t.Fatalf("no HorizontalPodAutoscaler")
		}
		if r.deploy.Spec.Replicas != nil {
			t.Errorf("Deployment sets replicas while the HPA owns them")
		}
		if *r.hpa.Spec.MinReplicas != 3 || r.hpa.Spec.MaxReplicas != 8 {
			t.Errorf("HPA %d..%d, want 3..8", *r.hpa.Spec.MinReplicas, r.hpa.Spec.MaxReplicas)
		}
	}},
	{name: "service monitor", set: []string{"serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom"}, check: func(t *testing.T, r *rendered) {
		if r.monitor == nil {
			t.Fatalf("no ServiceMonitor")
		}
		if r.monitor.Labels["release"] != "prom" {
			t.Errorf("ServiceMonitor labels %v lack release=prom", r.monitor.Labels)
		}
	}},
	{name: "existing secrets, enrollment on", values: []string{"existing-secrets.yaml"}, check: func(t *testing.T, r *rendered) {
		if len(r.secrets) != 0 {
			t.Errorf("chart created Secrets %v for existing ones", keys(r.secrets))
		}
		c := r.deploy.Spec.Template.Spec.Containers[0]
		if env(c, "BETCODE_RELAY_CA_KEY") != "/etc/betcode/ca/ca.key" {
			t.Errorf("no --ca-key with ca.keyKey set")
		}
		if v := volume(t, r.deploy, "tls"); v.Secret.SecretName != "prod-relay-tls" {
			t.Errorf("tls volume from %q, want prod-relay-tls", v.Secret.SecretName)
		}
		if v := volume(t, r.deploy, "ca"); v.Secret.SecretName != "prod-relay-ca" || len(v.Secret.Items) != 2 {
			t.Errorf("ca volume %+v, want prod-relay-ca with the certificate and the key", v.Secret)
		}
	}},
	{name: "created secrets", values: []string{"created-secrets.yaml"}, check: func(t *testing.T, r *rendered) {
		if len(r.secrets) != 3 {
			t.Errorf("Secrets %v, want tls, ca and database", keys(r.secrets))
		}
		if _, ok := r.deploy.Spec.Template.Annotations["checksum/secrets"]; !ok {
			t.Errorf("no checksum/secrets annotation: pods would not roll when a Secret changes")
		}
	}},
	{name: "everything on, IPv6, no preStop pause", values: []string{"existing-secrets.yaml"}, set: []string{
		"autoscaling.enabled=true", "serviceMonitor.enabled=true", "relay.ipv6=true", "lifecycle.preStopSleepSeconds=0",
		"relay.otlpEndpoint=otel-collector.observability:4317", "relay.otlpInsecure=true", "relay.drainGraceSeconds=40", "service.type=ClusterIP",
		"podDisruptionBudget.maxUnavailable=2", "replicaCount=5",
	}, check: func(t *testing.T, r *rendered) {
		c := r.deploy.Spec.Template.Spec.Containers[0]
		if got := env(c, "BETCODE_RELAY_ADVERTISE_ADDR"); got != "[$(POD_IP)]:8443" {
			t.Errorf("advertise address %q, want [$(POD_IP)]:8443", got)
		}
		if c.Lifecycle != nil {
			t.Errorf("preStop rendered with preStopSleepSeconds=0")
		}
		if env(c, "BETCODE_RELAY_OTLP_ENDPOINT") == "" || env(c, "BETCODE_RELAY_DRAIN_GRACE") != "40s" {
			t.Errorf("otlp endpoint or drain grace not passed on")
		}
		if got := *r.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 55 {
			t.Errorf("terminationGracePeriodSeconds %d, want 0 + 40 + 15", got)
		}
	}},
}

// TestChart renders the chart for each case, decodes every object strictly
// into its Kubernetes type, validates the output with kubeconform, and
// checks what a rolling deploy without lost streams needs.
func TestChart(t *testing.T) {
	helm := helmBin(t)
	kc := kubeconformBin(t)
	schemas := writeSchemas(t, t.TempDir())
	if out, err := run(t, helm, "lint", "--strict", chart, "--kube-version", kubeVersion); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	flags := serveFlags(t)
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			text, err := renderChart(t, tc.values, tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			manifest := filepath.Join(t.TempDir(), "relay.yaml")
			if err := os.WriteFile(manifest, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := run(t, kc, "-strict", "-summary", "-schema-location", schemas, manifest); err != nil {
				t.Fatalf("kubeconform: %v\n%s", err, out)
			}
			r := decode(t, text)
			checkRollout(t, r)
			checkProbes(t, r)
			checkSelectors(t, r)
			checkSecrets(t, r)
			checkRelayEnv(t, r, flags)
			checkHardening(t, r)
			tc.check(t, r)
		})
	}
}

// checkRollout: at least two replicas; a rollout and a node drain keep one
// serving; the kubelet waits longer than preStop plus the relay's drain.
func checkRollout(t *testing.T, r *rendered) {
	t.Helper()
	d := r.deploy
	switch {
	case r.hpa != nil:
		if *r.hpa.Spec.MinReplicas < 2 {
			t.Errorf("HPA minReplicas %d < 2", *r.hpa.Spec.MinReplicas)
		}
		if ref := r.hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
			t.Errorf("HPA targets %+v, not the Deployment %s", ref, d.Name)
		}
	case d.Spec.Replicas == nil || *d.Spec.Replicas < 2:
		t.Errorf("Deployment replicas %v, want at least 2", d.Spec.Replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update may take a replica down before its successor is ready: %+v", ru)
	}
	if r.pdb == nil || r.pdb.Spec.MaxUnavailable == nil {
		t.Errorf("no PodDisruptionBudget with maxUnavailable")
	}
	c := d.Spec.Template.Spec.Containers[0]
	var preStop int64
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Exec != nil {
			t.Errorf("preStop %+v: want the kubelet's sleep (the image has no shell)", c.Lifecycle.PreStop)
		} else {
			preStop = c.Lifecycle.PreStop.Sleep.Seconds
		}
	}
	drain := durationSeconds(t, env(c, "BETCODE_RELAY_DRAIN_GRACE"))
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	// The relay's own shutdown after the drain takes up to its 10 s
	// ShutdownTimeout: keep at least that on top.
	if grace == nil || *grace < preStop+drain+10 {
		t.Errorf("terminationGracePeriodSeconds %v < preStop %d + drain %d + 10", grace, preStop, drain)
	}
}

// checkProbes: liveness /healthz and readiness /readyz on the metrics
// port, which the relay serves where BETCODE_RELAY_METRICS_LISTEN says.
func checkProbes(t *testing.T, r *rendered) {
	t.Helper()
	c := r.deploy.Spec.Template.Spec.Containers[0]
	metricsPort := containerPort(t, c, "metrics")
	if got, want := env(c, "BETCODE_RELAY_METRICS_LISTEN"), fmt.Sprintf(":%d", metricsPort); got != want {
		t.Errorf("metrics listen %q, want %q (the probes' port)", got, want)
	}
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"startup", "/healthz", c.StartupProbe}, {"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe %+v: want an HTTP probe", p.name, p.probe)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %s on %s, want %s on metrics", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	if got, want := env(c, "BETCODE_RELAY_LISTEN"), fmt.Sprintf(":%d", containerPort(t, c, "relay")); got != want {
		t.Errorf("listen %q, want %q", got, want)
	}
}

// checkSelectors: every selector (Deployment, PDB, Services, the
// ServiceMonitor) picks exactly what it should, and named ports exist.
func checkSelectors(t *testing.T, r *rendered) {
	t.Helper()
	pod := labels.Set(r.deploy.Spec.Template.Labels)
	match := func(what string, sel *metav1.LabelSelector, set labels.Set) {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || s.Empty() || !s.Matches(set) {
			t.Errorf("%s selector %v does not match %v (%v)", what, sel, set, err)
		}
	}
	match("Deployment", r.deploy.Spec.Selector, pod)
	if r.pdb != nil {
		match("PodDisruptionBudget", r.pdb.Spec.Selector, pod)
	}
	c := r.deploy.Spec.Template.Spec.Containers[0]
	if len(r.services) != 2 {
		t.Fatalf("Services %v, want the relay's and the metrics'", keys(r.services))
	}
	var metricsSvc *corev1.Service
	for name, s := range r.services {
		match("Service "+name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, pod)
		for _, p := range s.Spec.Ports {
			containerPort(t, c, p.TargetPort.String())
		}
		if s.Labels["app.kubernetes.io/component"] == "metrics" {
			metricsSvc = s
		}
	}
	if metricsSvc == nil {
		t.Fatalf("no metrics Service")
	}
	if r.monitor != nil {
		match("ServiceMonitor", &r.monitor.Spec.Selector, metricsSvc.Labels)
		for name, s := range r.services {
			if s != metricsSvc {
				s, _ := metav1.LabelSelectorAsSelector(&r.monitor.Spec.Selector)
				if s.Matches(labels.Set(r.services[name].Labels)) {
					t.Errorf("ServiceMonitor also selects Service %s: every pod would be scraped twice", name)
				}
			}
		}
		for _, ep := range r.monitor.Spec.Endpoints {
			if ep.Port != metricsSvc.Spec.Ports[0].Name {
				t.Errorf("ServiceMonitor endpoint port %v, want %s", ep.Port, metricsSvc.Spec.Ports[0].Name)
			}
		}
	}
}

// checkSecrets: the certificate, key, CA and database URL come from
// Secrets mounted where the environment points; a Secret the chart
// creates has the keys the pod reads; no key material in the output unless
// the chart was asked to create the Secret.
func checkSecrets(t *testing.T, r *rendered) {
	t.Helper()
	spec := r.deploy.Spec.Template.Spec
	c := spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("volume %s mounted writable", m.Name)
		}
		mounts[m.Name] = m.MountPath
	}
	files := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.Secret == nil {
			t.Errorf("volume %s is not a Secret", v.Name)
			continue
		}
		if m := v.Secret.DefaultMode; m == nil || *m&0o007 != 0 {
			t.Errorf("volume %s mode %v readable by others", v.Name, m)
		}
		for _, it := range v.Secret.Items {
			files[mounts[v.Name]+"/"+it.Path] = true
			if s, ok := r.secrets[v.Secret.SecretName]; ok {
				if _, ok := s.Data[it.Key]; !ok {
					t.Errorf("Secret %s lacks key %s the pod mounts", s.Name, it.Key)
				}
			}
		}
	}
	for _, e := range []string{"BETCODE_RELAY_TLS_CERT", "BETCODE_RELAY_TLS_KEY", "BETCODE_RELAY_CLIENT_CA", "BETCODE_RELAY_CA_KEY"} {
		if p := env(c, e); p != "" && !files[p] {
			t.Errorf("%s=%s is not a mounted Secret file (mounted: %v)", e, p, keys(files))
		} else if p == "" && e != "BETCODE_RELAY_CA_KEY" {
			t.Errorf("%s not set", e)
		}
	}
	db := envVar(c, "BETCODE_RELAY_DATABASE_URL")
	if db == nil || db.Value != "" || db.ValueFrom == nil || db.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("database URL %+v: want it from a Secret", db)
	}
	if s, ok := r.secrets[db.ValueFrom.SecretKeyRef.Name]; ok {
		if _, ok := s.Data[db.ValueFrom.SecretKeyRef.Key]; !ok {
			t.Errorf("Secret %s lacks key %s", s.Name, db.ValueFrom.SecretKeyRef.Key)
		}
	}
	if len(r.secrets) == 0 {
		for _, leak := range []string{"PRIVATE KEY", "BEGIN CERTIFICATE", "postgres://", "postgresql://"} {
			if strings.Contains(r.text, leak) {
				t.Errorf("rendered output contains %q with no Secret asked for", leak)
			}
		}
	}
}

var flagDef = regexp.MustCompile(`f\.\w+\("([a-z0-9-]+)"`)

// serveFlags reads the flags of `betcode-relay serve` from its source.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repo, "relay", "cmd", "betcode-relay", "serve.go"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, m := range flagDef.FindAllSubmatch(src, -1) {
		flags[string(m[1])] = true
	}
	if !flags["listen"] || !flags["database-url"] {
		t.Fatalf("flags of serve.go not found (%v): has its source changed shape?", keys(flags))
	}
	return flags
}

// checkRelayEnv: every BETCODE_RELAY_* variable names a flag of serve, so
// none is silently ignored.
func checkRelayEnv(t *testing.T, r *rendered, flags map[string]bool) {
	t.Helper()
	for _, e := range r.deploy.Spec.Template.Spec.Containers[0].Env {
		name, ok := strings.CutPrefix(e.Name, "BETCODE_RELAY_")
		if !ok {
			continue
		}
		flag := strings.ReplaceAll(strings.ToLower(name), "_", "-")
		if !flags[flag] {
			t.Errorf("%s sets --%s, which betcode-relay serve does not have", e.Name, flag)
		}
	}
}

// checkHardening: non-root, read-only, no privilege escalation, no
// service account token, resources requested.
func checkHardening(t *testing.T, r *rendered) {
	t.Helper()
	spec := r.deploy.Spec.Template.Spec
	c := spec.Containers[0]
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod may run as root: %+v", psc)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v: want a read-only root and no privilege escalation", sc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("service account token mounted into the relay, which calls no Kubernetes API")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no CPU or memory request: %v", c.Resources.Requests)
	}
	if r.account != nil && r.account.Name != spec.ServiceAccountName {
		t.Errorf("pod runs as %q, chart creates ServiceAccount %q", spec.ServiceAccountName, r.account.Name)
	}
}

// TestChartRefuses: values that cannot work fail the render with the key
// to fix.
func TestChartRefuses(t *testing.T) {
	helmBin(t)
	tests := []struct {
		name, want string
		set        []string
	}{
		{"one replica", "replicaCount must be at least 2", []string{"replicaCount=1"}},
		{"autoscaling down to one", "autoscaling.minReplicas must be at least 2", []string{"autoscaling.enabled=true", "autoscaling.minReplicas=1"}},
		{"tls.create without a key", "tls.create needs tls.cert and tls.key", []string{"tls.create=true", "tls.cert=x"}},
		{"database.create without a URL", "database.create needs database.url", []string{"database.create=true"}},
		{"no shutdown margin", "lifecycle.shutdownMarginSeconds must be at least 10", []string{"lifecycle.shutdownMarginSeconds=9"}},
		{"bad log format", "relay.logFormat must be text or json", []string{"relay.logFormat=xml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(t, nil, tt.set...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render: %v, want an error with %q", err, tt.want)
			}
		})
	}
	// The preStop sleep action needs Kubernetes 1.30.
	_, err := run(t, helmBin(t), "template", "relay", chart, "--kube-version", "1.29.0")
	if err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Fatalf("render for Kubernetes 1.29: %v, want the chart's kubeVersion refusal", err)
	}
}

// TestChartNotes renders NOTES.txt, which helm template leaves out (and
// helm install --dry-run needs a cluster for): a copy of the chart renders
// it through tpl in a template of its own.
func TestChartNotes(t *testing.T) {
	helm := helmBin(t)
	dir := filepath.Join(t.TempDir(), "betcode-relay")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), notes, 0o600); err != nil {
		t.Fatal(err)
	}
	const show = "templates/zz-notes-test.yaml"
	if err := os.WriteFile(filepath.Join(dir, show), []byte("notes: {{ tpl (.Files.Get \"notes.txt\") . | toJson }}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, helm, "template", "relay", dir, "--namespace", "betcode", "--kube-version", kubeVersion, "--show-only", show)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Notes string }
	if err := yaml.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"relay-betcode-relay-tls", "/readyz", "45s in all", "admin user create", "3 replicas"} {
		if !strings.Contains(got.Notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, got.Notes)
		}
	}
}

func env(c corev1.Container, name string) string {
	if e := envVar(c, name); e != nil {
		return e.Value
	}
	return ""
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Errorf("container has no port %q", name)
	return 0
}

func volume(t *testing.T, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name && v.Secret != nil {
			return v
		}
	}
	t.Fatalf("no Secret volume %q", name)
	return corev1.Volume{}
}

// durationSeconds parses the relay's duration flag value in whole seconds.
func durationSeconds(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscanf(s, "%ds", &n); err != nil || fmt.Sprintf("%ds", n) != s {
		t.Fatalf("drain grace %q: want whole seconds like 25s", s)
	}
	return n
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
