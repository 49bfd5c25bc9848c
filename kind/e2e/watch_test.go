//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// watchBound is how soon a watch without resourceVersion must stream its
// first event: below the 3 s the API server waits for its watch cache to
// reach etcd's current revision before it answers 504.
const watchBound = 2 * time.Second

// TestWatchWithoutResourceVersion: a watch without resourceVersion on a
// resource that has not changed since etcd's revision moved on (the node's
// CSINode, after a write elsewhere) answers 200 and streams the CSINode at
// once. The API server serves it from its watch cache once that cache has
// reached etcd's current revision, which it learns from the progress
// notifications it asks etcd for: etcd 3.4 (Debian's, which the local node
// ran before) gives none, and after 3 s the API server ends the stream with
// an ERROR event, `504 Too large resource version` (or answers 504 at once);
// clients that watch without listing first stall on it.
// One plain HTTP request, no client-go watch: client-go retries a 504 that
// carries Retry-After, which would hide it.
func TestWatchWithoutResourceVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := allNodes[0]

	// Move etcd's revision past the CSINode's last change: a ConfigMap
	// created and deleted in the suite's namespace.
	cms := cl.Client.CoreV1().ConfigMaps(cl.Namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "watch-probe-"}}
	cm, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	rc, err := clientcmd.BuildConfigFromFlags("", cl.Provider.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	u := rc.Host + "/apis/storage.k8s.io/v1/csinodes?watch=1&fieldSelector=" + url.QueryEscape("metadata.name="+node)
	// Time to see the API server's answer when it is late (504 after 3 s);
	// watchBound is checked on the times measured.
	wctx, wcancel := context.WithTimeout(ctx, 5*watchBound)
	defer wcancel()
	req, err := http.NewRequestWithContext(wctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v after %s, want a stream within %s", u, err, time.Since(start).Round(time.Millisecond), watchBound)
	}
	defer func() { _ = resp.Body.Close() }()
	opened := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		t.Fatalf("GET %s: %s after %s, want 200 and a stream: %s (an etcd without progress notifications on request, older than 3.5.24?)",
			u, resp.Status, opened.Round(time.Millisecond), bytes.TrimSpace(body))
	}
	// An event's object: the CSINode, or for an ERROR event a Status.
	var ev struct {
		Type   string `json:"type"`
		Object struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Code     int               `json:"code"`
			Message  string            `json:"message"`
		} `json:"object"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		t.Fatalf("GET %s: 200 after %s, then no event: %v after %s", u, opened.Round(time.Millisecond), err, time.Since(start).Round(time.Millisecond))
	}
	first := time.Since(start)
	if ev.Type == "ERROR" {
		t.Fatalf("GET %s: 200 after %s, then after %s an ERROR event: %d %s; want ADDED CSINode %q (an etcd without progress notifications on request, older than 3.5.24?)",
			u, opened.Round(time.Millisecond), first.Round(time.Millisecond), ev.Object.Code, ev.Object.Message, node)
	}
	if ev.Type != "ADDED" || ev.Object.Kind != "CSINode" || ev.Object.Metadata.Name != node {
		t.Fatalf("GET %s: first event %s %s %q after %s, want ADDED CSINode %q", u, ev.Type, ev.Object.Kind, ev.Object.Metadata.Name, first.Round(time.Millisecond), node)
	}
	if first > watchBound {
		t.Fatalf("GET %s: 200 after %s, first event after %s, want it within %s", u, opened.Round(time.Millisecond), first.Round(time.Millisecond), watchBound)
	}
	t.Logf("watch without resourceVersion on CSINode %s: 200 after %s, first event (ADDED) after %s",
		node, opened.Round(time.Millisecond), first.Round(time.Millisecond))
}
