package nodestatus

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeAPIServer is a fake of the few API server calls the Reporter makes,
// for the request bodies and the Reporter's decisions only (a real API
// server cannot run in a unit test here; the e2e suite runs the Reporter
// against the local node's). It keeps one Node and its CSINode, applies a
// strategic merge patch of status.conditions (merged by type) and the JSON
// patch of RemoveTaint (test, remove), serves watches, and records every
// write.
type fakeAPIServer struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	rv       int
	node     map[string]any // nil: absent
	csinode  map[string]any // nil: absent
	changed  chan struct{}  // closed and replaced at each change
	patches  []fakePatch
	requests int
	// csinodeWatch receives a value as each CSINode watch starts: this fake
	// ignores resourceVersion, so a change before a watch starts is not
	// replayed as the API server would; a test waits for a watch first.
	csinodeWatch chan struct{}
}

type fakePatch struct {
	path, contentType string
	body              []byte
}

func newFakeAPIServer(t *testing.T, nodeName string) *fakeAPIServer {
	f := &fakeAPIServer{t: t, changed: make(chan struct{}), csinodeWatch: make(chan struct{}, 1)}
	f.node = map[string]any{
		"metadata": map[string]any{"name": nodeName, "uid": "uid-1", "annotations": map[string]any{}},
		"spec":     map[string]any{},
		"status":   map[string]any{"conditions": []any{}},
	}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// client returns a Client of the fake with a token file.
func (f *fakeAPIServer) client(t *testing.T) *Client {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("fake-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	c, err := NewClient(f.srv.URL, ca, tok)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// update changes the objects under the lock and wakes the watches.
func (f *fakeAPIServer) update(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
	f.bump()
}

func (f *fakeAPIServer) bump() {
	f.rv++
	for _, o := range []map[string]any{f.node, f.csinode} {
		if o != nil {
			o["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(f.rv)
		}
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// setCSINodeDrivers makes the CSINode list the drivers (nil: no CSINode).
func (f *fakeAPIServer) setCSINodeDrivers(drivers ...string) {
	f.update(func() {
		if drivers == nil {
			f.csinode = nil
			return
		}
		var ds []any
		for _, d := range drivers {
			ds = append(ds, map[string]any{"name": d, "nodeID": "node-id-1"})
		}
		f.csinode = map[string]any{"metadata": map[string]any{"name": "node-1"}, "spec": map[string]any{"drivers": ds}}
	})
}

// annotate sets the Node annotation of the kubelet for the drivers.
func (f *fakeAPIServer) annotate(drivers ...string) {
	f.update(func() {
		m := map[string]string{}
		for _, d := range drivers {
			m[d] = "node-id-1"
		}
		b, _ := json.Marshal(m)
		f.node["metadata"].(map[string]any)["annotations"] = map[string]any{"csi.volume.kubernetes.io/nodeid": string(b)}
	})
}

func (f *fakeAPIServer) setTaints(taints ...Taint) {
	f.update(func() {
		var ts []any
		for _, t := range taints {
			ts = append(ts, map[string]any{"key": t.Key, "value": t.Value, "effect": t.Effect})
		}
		f.node["spec"].(map[string]any)["taints"] = ts
	})
}

func (f *fakeAPIServer) setConditions(conds ...Condition) {
	f.update(func() {
		var cs []any
		for _, c := range conds {
			var m map[string]any
			b, _ := json.Marshal(c)
			_ = json.Unmarshal(b, &m)
			cs = append(cs, m)
		}
		f.node["status"].(map[string]any)["conditions"] = cs
	})
}

// snapshot returns the Node as the Reporter reads it, and the patches so far.
func (f *fakeAPIServer) snapshot() (Node, []fakePatch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n Node
	b, _ := json.Marshal(f.node)
	_ = json.Unmarshal(b, &n)
	return n, append([]fakePatch(nil), f.patches...)
}

// waitFor waits until cond holds of the Node and the patches (checked at
// each change), or the context ends.
func (f *fakeAPIServer) waitFor(ctx context.Context, what string, cond func(Node, []fakePatch) bool) error {
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		n, p := f.snapshot()
		if cond(n, p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-ch:
		}
	}
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, req *http.Request) {
	if req.Header.Get("Authorization") != "Bearer fake-token" {
		http.Error(w, `{"kind":"Status","code":401,"reason":"Unauthorized","message":"no token"}`, http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	f.requests++
	f.mu.Unlock()
	path := req.URL.Path
	switch {
	case req.URL.Query().Get("watch") == "true":
		f.serveWatch(w, req)
	case req.Method == http.MethodGet && strings.HasPrefix(path, nodesPath+"/"):
		f.get(w, func() map[string]any { return f.node })
	case req.Method == http.MethodGet && strings.HasPrefix(path, csinodesPath+"/"):
		f.get(w, func() map[string]any { return f.csinode })
	case req.Method == http.MethodPatch:
		f.patch(w, req)
	default:
		http.Error(w, "unexpected "+req.Method+" "+path, http.StatusNotImplemented)
	}
}

func (f *fakeAPIServer) get(w http.ResponseWriter, obj func() map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := obj()
	if o == nil {
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"kind":"Status","code":404,"reason":"NotFound","message":"not found"}`)
		return
	}
	json.NewEncoder(w).Encode(o)
}

func (f *fakeAPIServer) patch(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.patches = append(f.patches, fakePatch{path: req.URL.Path, contentType: req.Header.Get("Content-Type"), body: body})
	switch {
	case strings.HasSuffix(req.URL.Path, "/status") && req.Header.Get("Content-Type") == "application/strategic-merge-patch+json":
		var p struct {
			Status struct {
				Conditions []map[string]any `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		st := f.node["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
	next:
		for _, c := range p.Status.Conditions {
			for i, old := range conds {
				if old.(map[string]any)["type"] == c["type"] {
					conds[i] = c
					continue next
				}
			}
			conds = append(conds, c)
		}
		st["conditions"] = conds
	case req.Header.Get("Content-Type") == "application/json-patch+json":
		var ops []struct {
			Op, Path string
			Value    any
		}
		if err := json.Unmarshal(body, &ops); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		taints, _ := f.node["spec"].(map[string]any)["taints"].([]any)
		for _, op := range ops {
			var i int
			var field string
			fmt.Sscanf(strings.Replace(op.Path, "/spec/taints/", "", 1), "%d", &i)
			if i >= len(taints) {
				w.WriteHeader(http.StatusUnprocessableEntity)
				io.WriteString(w, `{"kind":"Status","code":422,"reason":"Invalid","message":"index out of range"}`)
				return
			}
			if _, rest, ok := strings.Cut(strings.TrimPrefix(op.Path, "/spec/taints/"), "/"); ok {
				field = rest
			}
			switch op.Op {
			case "test":
				if taints[i].(map[string]any)[field] != op.Value {
					w.WriteHeader(http.StatusUnprocessableEntity)
					io.WriteString(w, `{"kind":"Status","code":422,"reason":"Invalid","message":"test failed"}`)
					return
				}
			case "remove":
				taints = append(taints[:i:i], taints[i+1:]...)
			}
		}
		f.node["spec"].(map[string]any)["taints"] = taints
	default:
		http.Error(w, "unexpected patch", http.StatusUnsupportedMediaType)
		return
	}
	f.bump()
	json.NewEncoder(w).Encode(f.node)
}

// serveWatch sends the object's state at each change (MODIFIED, or
// DELETED when it is gone) until the client leaves.
func (f *fakeAPIServer) serveWatch(w http.ResponseWriter, req *http.Request) {
	obj := func() map[string]any { return f.node }
	if strings.HasPrefix(req.URL.Path, csinodesPath) {
		obj = func() map[string]any { return f.csinode }
	}
	fl := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	// The first change to send is the first after the watch started (and
	// after the test learnt it did, through csinodeWatch).
	f.mu.Lock()
	ch := f.changed
	f.mu.Unlock()
	if strings.HasPrefix(req.URL.Path, csinodesPath) {
		select {
		case f.csinodeWatch <- struct{}{}:
		default:
		}
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-req.Context().Done():
			return
		case <-ch:
		}
		// The state sent and the channel of the next change are taken
		// together: a change while this event is sent is sent next.
		f.mu.Lock()
		o := obj()
		ch = f.changed
		ev := watchEvent{Type: "MODIFIED"}
		if o == nil {
			ev.Type = "DELETED"
			ev.Object = json.RawMessage(`{}`)
		} else {
			ev.Object, _ = json.Marshal(o)
		}
		f.mu.Unlock()
		if enc.Encode(ev) != nil {
			return
		}
		fl.Flush()
	}
}
