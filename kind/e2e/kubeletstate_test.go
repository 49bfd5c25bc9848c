//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/csi-registrar/csi-registrar/internal/kubeletplugins"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeletRound bounds how long the kubelet takes to act on a socket event:
// its plugin manager's reconciler runs every second; one more of margin.
const kubeletRound = 2 * kubeletplugins.ReconcilerPeriod

// kubeletPaths reads the kubelet's plugin_manager_total_plugins for the
// driver's paths: those in its actual state, and those in its desired
// state only.
func kubeletPaths(t testing.TB, ctx context.Context) (actual, desiredOnly []string) {
	t.Helper()
	for _, s := range kubeletPluginSockets(t, ctx, filepath.Join(PluginsRegistry, cfg.Driver)) {
		path, states, _ := strings.Cut(s, " ")
		switch {
		case strings.Contains(states, "actual_state_of_world"):
			actual = append(actual, filepath.Base(path))
		case strings.Contains(states, "desired_state_of_world"):
			desiredOnly = append(desiredOnly, filepath.Base(path))
		}
	}
	return actual, desiredOnly
}

// kubeletPluginSockets lists the local node's kubelet's
// plugin_manager_total_plugins series for the sockets whose path contains
// name, as "PATH STATE[,STATE]". It asks the kubelet itself (127.0.0.1:10250,
// authenticated as the kubeconfig's admin; the API server's node proxy is not
// authorized on the local node); the kubelet's serving certificate is
// self-signed, so it is not verified.
func kubeletPluginSockets(t testing.TB, ctx context.Context, name string) []string {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", cl.Provider.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.Insecure, rc.CAFile, rc.CAData = true, "", nil
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the kubelet's /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the kubelet's /metrics: %s %v: %.200s", resp.Status, err, body)
	}
	states := map[string][]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "plugin_manager_total_plugins{") || strings.HasSuffix(line, " 0") {
			continue
		}
		var sock, state string
		for _, kv := range strings.Split(line[strings.IndexByte(line, '{')+1:strings.LastIndexByte(line, '}')], ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "socket_path":
				sock = strings.Trim(v, `"`)
			case "state":
				state = strings.Trim(v, `"`)
			}
		}
		if strings.Contains(sock, name) {
			states[sock] = append(states[sock], state)
		}
	}
	var out []string
	for sock, st := range states {
		sort.Strings(st)
		out = append(out, sock+" "+strings.Join(st, ","))
	}
	sort.Strings(out)
	return out
}
