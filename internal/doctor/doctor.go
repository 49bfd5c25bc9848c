// Package doctor diagnoses plugin registration on a node: it walks the
// kubelet's plugins_registry the way the kubelet's plugin watcher does, asks
// every socket GetInfo under the kubelet's own 1 s deadline, dials each CSI
// endpoint it learns as the kubelet would (Probe, GetPluginInfo,
// NodeGetInfo), and, given a kubeconfig, compares with what the API server
// holds (the Node annotation, the CSINode entries, the CSIDriver objects).
//
// It never modifies anything: it calls no NotifyRegistrationStatus, removes
// no file and writes nothing to the API server. Its result is a Report: the
// registry's entries and a list of Findings, each with a fix.
package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// Defaults for Options.
const (
	DefaultKubeletDir = csiplugin.DefaultKubeletDir
	DefaultTimeout    = time.Second
)

// Options configures Run. Paths are host paths (as the kubelet sees them);
// HostRoot says where the host's file system is mounted in the process
// running the diagnosis.
type Options struct {
	// KubeletDir is the kubelet's root directory. Default /var/lib/kubelet.
	KubeletDir string
	// PluginsRegistry is the directory the kubelet's plugin watcher watches.
	// Default <KubeletDir>/plugins_registry.
	PluginsRegistry string
	// HostRoot is prepended to every host path before it is read or dialed:
	// "" on the node itself, "/host" in a `kubectl debug node/...` pod.
	HostRoot string
	// NodeName is the Kubernetes node name, compared with each driver's
	// node ID and used for the API objects. Empty: no node ID comparison
	// (and no API comparison).
	NodeName string
	// NodeLabels are the Node's labels; a driver topology segment with the
	// same key and another value would make the kubelet reject it. With a
	// Kubeconfig, the Node's labels from the API server are used as well.
	NodeLabels map[string]string
	// Timeout bounds each call to a CSI driver and each API request.
	// GetInfo always uses the kubelet's csiplugin.GetInfoTimeout. Default 1s.
	Timeout time.Duration
	// Kubeconfig, if set, is the path of a kubeconfig whose current context
	// is used to read the Node, its CSINode and the CSIDriver objects.
	Kubeconfig string
	// KubeletMetrics, if set, is a file holding the kubelet's /metrics text,
	// read instead of asking the API server's node proxy (which a kubeconfig
	// turns on and which needs `get nodes/proxy`).
	KubeletMetrics string
}

func (o Options) withDefaults() Options {
	if o.KubeletDir == "" {
		o.KubeletDir = DefaultKubeletDir
	}
	if o.PluginsRegistry == "" {
		o.PluginsRegistry = filepath.Join(o.KubeletDir, csiplugin.PluginsRegistryDir)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// validate checks the options; its errors are *csiplugin.ValidationError
// through badOption.
func (o Options) validate() error {
	for _, p := range []struct{ what, v string }{
		{"kubelet dir", o.KubeletDir}, {"plugins registry", o.PluginsRegistry},
	} {
		if !filepath.IsAbs(p.v) {
			return badOption(p.what, p.v, "must be an absolute host path", "e.g. /var/lib/kubelet")
		}
	}
	if o.HostRoot != "" && !filepath.IsAbs(o.HostRoot) {
		return badOption("host root", o.HostRoot, "must be an absolute path or empty",
			"use /host in a `kubectl debug node/...` pod, or leave it empty on the node")
	}
	if o.Timeout < 0 {
		return badOption("timeout", o.Timeout.String(), "must be positive", "e.g. 1s")
	}
	for k := range o.NodeLabels {
		if k == "" {
			return badOption("node label", "="+o.NodeLabels[k], "needs a key", "write key=value")
		}
	}
	return nil
}

// Severity ranks a Finding.
type Severity string

// Severities. Run's Report is healthy when it has no finding of SeverityError
// or SeverityWarning.
const (
	// SeverityError: the registration is broken (the kubelet rejects it,
	// cannot reach it, or a pod using the driver will fail).
	SeverityError Severity = "error"
	// SeverityWarning: something that breaks registration in some
	// conditions, or leftovers that slow it down.
	SeverityWarning Severity = "warning"
	// SeverityInfo: worth knowing, not wrong in itself.
	SeverityInfo Severity = "info"
)

// Finding is one problem found, with what to do about it.
type Finding struct {
	Severity Severity `json:"severity"`
	// Subject is what the finding is about: a path, a driver name, an API object.
	Subject string `json:"subject"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Report is the outcome of Run.
type Report struct {
	PluginsRegistry string    `json:"pluginsRegistry"`
	HostRoot        string    `json:"hostRoot,omitempty"`
	NodeName        string    `json:"nodeName,omitempty"`
	Time            time.Time `json:"time"`
	// Entries are the registry's files, sorted by path.
	Entries []Entry `json:"entries"`
	// API is what the API server holds, when a kubeconfig was given.
	API *APIState `json:"api,omitempty"`
	// Kubelet is the kubelet's plugin state (its metric), when read.
	Kubelet  *KubeletState `json:"kubelet,omitempty"`
	Findings []Finding     `json:"findings"`
}

// Healthy reports whether the report has no error or warning.
func (r *Report) Healthy() bool {
	for _, f := range r.Findings {
		if f.Severity == SeverityError || f.Severity == SeverityWarning {
			return false
		}
	}
	return true
}

// Count returns the number of findings of severity s.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Run diagnoses the node's plugin registration. The error is for options
// that are not valid (a *csiplugin.ValidationError) or a kubeconfig that
// cannot be used; everything found on the node is a Finding.
func Run(ctx context.Context, opts Options) (*Report, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	saved, err := readKubeletMetrics(o.KubeletMetrics)
	if err != nil {
		return nil, err
	}
	var api *apiClient
	if o.Kubeconfig != "" {
		var err error
		if api, err = newAPIClient(o.Kubeconfig, o.HostRoot, o.Timeout); err != nil {
			return nil, err
		}
		if o.NodeName == "" {
			return nil, badOption("node name", "", "is required with a kubeconfig",
				"pass --node-name or set KUBE_NODE_NAME")
		}
	}
	d := &diagnosis{opts: o, saved: saved, report: &Report{
		PluginsRegistry: o.PluginsRegistry, HostRoot: o.HostRoot, NodeName: o.NodeName, Time: time.Now().UTC(),
		Entries: []Entry{}, Findings: []Finding{},
	}}
	if api != nil {
		d.fetchAPI(ctx, api) // first: the Node's labels take part in the topology checks
	}
	d.walk()
	d.inspectSockets(ctx)
	d.compareAPI()
	d.fetchKubelet(ctx, api)
	d.compareKubelet()
	d.findOverlaps(ctx)
	sortFindings(d.report.Findings)
	return d.report, nil
}

// diagnosis is the state of one Run.
type diagnosis struct {
	opts   Options
	report *Report
	node   *apiNode             // the Node from the API server; nil without a kubeconfig
	saved  kubeletplugins.State // from Options.KubeletMetrics; nil without
	mu     sync.Mutex           // guards report.Findings while sockets are inspected concurrently
}

// local maps a host path to the path this process reads or dials.
func (d *diagnosis) local(hostPath string) string {
	if d.opts.HostRoot == "" {
		return hostPath
	}
	return filepath.Join(d.opts.HostRoot, hostPath)
}

func (d *diagnosis) add(f Finding) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.report.Findings = append(d.report.Findings, f)
}

func (d *diagnosis) addf(sev Severity, subject, fix, format string, args ...any) {
	d.add(Finding{Severity: sev, Subject: subject, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// inspectSockets asks every socket of the registry GetInfo, then checks the
// CSI endpoints they announce, one goroutine per socket (a hung socket costs
// its 1 s deadline once, not once per socket). It returns when all are done.
func (d *diagnosis) inspectSockets(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range d.report.Entries {
		e := &d.report.Entries[i]
		if e.Kind != KindSocket || e.Ignored != "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.inspectSocket(ctx, e)
		}()
	}
	wg.Wait()
}

var severityRank = map[Severity]int{SeverityError: 0, SeverityWarning: 1, SeverityInfo: 2}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if a, b := severityRank[fs[i].Severity], severityRank[fs[j].Severity]; a != b {
			return a < b
		}
		return fs[i].Subject < fs[j].Subject
	})
}
