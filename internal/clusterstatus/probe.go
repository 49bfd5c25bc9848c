package clusterstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// prober asks, for nodes that are not registered, what a registrar or a
// kubelet says: at most Options.ProxyConcurrency calls at a time, each
// within Options.ProxyTimeout. A call past its deadline or refused is
// reported in Report.Unknown, never waited on longer.
type prober struct {
	client kubernetes.Interface
	opts   Options

	mu      sync.Mutex
	unknown map[string]Unknown // by What (forbidden ones by permission)
	metrics map[string]*nodeMetrics
}

// nodeMetrics is one kubelet's /metrics, read once for all drivers.
type nodeMetrics struct {
	once  sync.Once
	state kubeletplugins.State
	err   string // why it is unknown
}

func probe(ctx context.Context, client kubernetes.Interface, opts Options, r *Report, tasks []probeTask) {
	kubelet := opts.KubeletState && len(r.kubelet) > 0
	if (len(tasks) == 0 && !kubelet) || opts.NoProxy {
		return
	}
	p := &prober{client: client, opts: opts, unknown: map[string]Unknown{}, metrics: map[string]*nodeMetrics{}}
	sem := make(chan struct{}, opts.ProxyConcurrency)
	var wg sync.WaitGroup
	evidence := make([]string, len(tasks))
	for i := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			evidence[i] = p.evidence(ctx, &tasks[i])
		}()
	}
	held := make([]*KubeletPaths, len(r.kubelet))
	if kubelet {
		for i := range r.kubelet {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				held[i] = p.kubeletPaths(ctx, &r.kubelet[i])
			}()
		}
	}
	wg.Wait()
	for i, t := range r.kubelet {
		if held[i] != nil {
			applyKubelet(r, t, held[i])
		}
	}
	for i, t := range tasks {
		if evidence[i] != "" {
			n := &r.Drivers[t.driver].Nodes[t.node]
			n.Reason += "; " + evidence[i]
		}
	}
	var keys []string
	for k := range p.unknown {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.Unknown = append(r.Unknown, p.unknown[k])
	}
}

// evidence is what the registrar or the kubelet says about one node.
func (p *prober) evidence(ctx context.Context, t *probeTask) string {
	g, pod := t.group, t.pod
	if g != nil && g.readyzPort != "" && podRunning(pod) {
		stage, err := p.readyz(ctx, pod, g.readyzPort)
		if err == nil {
			return "registrar /readyz: " + stage
		}
		// Fall through to the kubelet's side.
	}
	var ev []string
	if s := p.kubeletSays(ctx, pod.Spec.NodeName, t.driverName); s != "" {
		ev = append(ev, s)
	}
	if s := p.events(ctx, pod); s != "" {
		ev = append(ev, s)
	}
	return strings.Join(ev, "; ")
}

func podRunning(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil
}

// readyz reads csi-registrar's /readyz through the API server's pod proxy:
// its body is the registration stage ("kubelet rejected: <error>"), with
// 200 or 503. A 503 the API server writes itself (it cannot reach the pod)
// is a Status object, not an answer.
func (p *prober) readyz(ctx context.Context, pod *corev1.Pod, port string) (string, error) {
	what := "/readyz of pod " + pod.Namespace + "/" + pod.Name
	ctx, cancel := context.WithTimeout(ctx, p.opts.ProxyTimeout)
	defer cancel()
	body, err := p.client.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, port, "readyz", nil).DoRaw(ctx)
	if err == nil || statusCode(err) == http.StatusServiceUnavailable && len(body) > 0 && !bytes.HasPrefix(body, []byte("{")) {
		return strings.TrimSpace(string(body)), nil
	}
	p.fail(what, "get", "pods/proxy", "the registrar's stage is not shown for nodes that are not registered", withBody(err, body), ctx)
	return "", err
}

// statusCode is the HTTP status of an API error, 0 if it has none.
func statusCode(err error) int {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return int(se.Status().Code)
	}
	return 0
}

// withBody adds to a proxy call's error the answer's status and text, which
// client-go's message leaves out (e.g. a kubelet's 403 names the user and
// the permission it lacks).
func withBody(err error, body []byte) error {
	code := statusCode(err)
	var st metav1.Status
	if code != 0 && bytes.HasPrefix(body, []byte("{")) && json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		// DoRaw does not decode the API server's Status (e.g. its own
		// "address not allowed" for a node address it does not proxy to, or
		// an RBAC refusal): its error would say "an unknown reason".
		if st.Code == 0 {
			st.Code = int32(code)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	if code != 0 && len(body) == 0 {
		return fmt.Errorf("HTTP %d, no body: %w", code, err)
	}
	if code == 0 || bytes.HasPrefix(body, []byte("{")) {
		return err
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	return &answerError{code: code, text: text}
}

// answerError is a non-2xx answer of the registrar or the kubelet behind
// the proxy (not of the API server: a 403 here is the kubelet refusing the
// API server, not RBAC refusing us).
type answerError struct {
	code int
	text string
}

func (e *answerError) Error() string { return fmt.Sprintf("answered HTTP %d: %s", e.code, e.text) }

// kubeletSays reads the kubelet's plugin watcher metric through the API
// server's node proxy, and says where the driver's registration socket is.
func (p *prober) kubeletSays(ctx context.Context, node, driver string) string {
	m := p.nodeMetrics(ctx, node)
	if m.err != "" {
		return "kubelet: " + m.err
	}
	v := m.state.Driver(driver)
	if len(v.Actual)+len(v.DesiredOnly)+len(v.ActualOnly) == 0 {
		return "kubelet's plugin watcher has no registration socket named for the driver (" + kubeletplugins.Metric + ")"
	}
	var found []string
	for _, sock := range v.Actual {
		if !slices.Contains(v.ActualOnly, sock) {
			found = append(found, fmt.Sprintf("kubelet's plugin watcher has %s in %s and %s", sock, kubeletplugins.StateActual, kubeletplugins.StateDesired))
		}
	}
	for _, sock := range v.ActualOnly {
		found = append(found, fmt.Sprintf("kubelet's plugin watcher has %s in %s", sock, kubeletplugins.StateActual))
	}
	for _, sock := range v.DesiredOnly {
		found = append(found, fmt.Sprintf("kubelet's plugin watcher has %s in %s", sock, kubeletplugins.StateDesired))
	}
	if len(found) > 3 {
		found = append(found[:3], fmt.Sprintf("%d more (--kubelet-state counts them)", len(found)-3))
	}
	return strings.Join(found, "; ")
}

// nodeMetrics reads the node's kubelet /metrics once, for every driver.
func (p *prober) nodeMetrics(ctx context.Context, node string) *nodeMetrics {
	p.mu.Lock()
	m := p.metrics[node]
	if m == nil {
		m = &nodeMetrics{}
		p.metrics[node] = m
	}
	p.mu.Unlock()
	m.once.Do(func() { p.readMetrics(ctx, node, m) })
	return m
}

func (p *prober) readMetrics(ctx context.Context, node string, m *nodeMetrics) {
	what := "/metrics of the kubelet on node " + node
	ctx, cancel := context.WithTimeout(ctx, p.opts.ProxyTimeout)
	defer cancel()
	body, err := p.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		err = withBody(err, body)
		p.fail(what, "get", "nodes/proxy", "the kubelet's view is not shown (for nodes that are not registered, and with --kubelet-state its registration paths)", err, ctx)
		m.err = "unknown (" + shortErr(err, ctx, p.opts.ProxyTimeout) + ")"
		return
	}
	st, err := kubeletplugins.Parse(body)
	if err != nil {
		m.err = err.Error()
		return
	}
	m.state = st
}

// events names the pod's latest warning event.
func (p *prober) events(ctx context.Context, pod *corev1.Pod) string {
	what := "events of pod " + pod.Namespace + "/" + pod.Name
	ctx, cancel := context.WithTimeout(ctx, p.opts.ProxyTimeout)
	defer cancel()
	list, err := p.client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(pod.UID) + ",type=" + corev1.EventTypeWarning})
	if err != nil {
		p.fail(what, "list", "events", "the pods' events are not shown for nodes that are not registered", err, ctx)
		return ""
	}
	var last *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	return fmt.Sprintf("pod event %s: %s", last.Reason, strings.TrimSpace(last.Message))
}

func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// fail records a proxy or list call that gave no answer: once per missing
// permission, else once per call.
func (p *prober) fail(what, verb, resource, consequence string, err error, ctx context.Context) {
	u := Unknown{What: what, Error: shortErr(err, ctx, p.opts.ProxyTimeout), Consequence: consequence}
	key := what
	var answer *answerError
	if apierrors.IsForbidden(err) && !errors.As(err, &answer) {
		u.Permission = permission(verb, resource, "", "cluster-wide")
		u.What = resource
		key = "forbidden " + u.Permission
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.unknown[key]; !ok {
		p.unknown[key] = u
	}
}

func shortErr(err error, ctx context.Context, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	return err.Error()
}
