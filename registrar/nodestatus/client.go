package nodestatus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The in-cluster configuration, as client-go's rest.InClusterConfig reads it.
const (
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	tokenFileName     = "token"
	caFileName        = "ca.crt"
)

// requestTimeout bounds each request but a watch.
const requestTimeout = 30 * time.Second

// Client is a small REST client of the Kubernetes API: the few calls the
// Reporter makes (get a Node, patch its status and its taints, get and
// watch a Node or a CSINode), with a bearer token re-read at each request
// (the kubelet rotates a projected token in place).
type Client struct {
	base      *url.URL
	http      *http.Client
	tokenFile string
}

// InClusterClient returns a Client of the API server this pod runs under:
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, the service account's
// CA and token under ServiceAccountDir. It reads them only when called.
func InClusterClient() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not running in a pod, or the pod's enableServiceLinks and the kubelet's service environment are off")
	}
	ca, err := os.ReadFile(ServiceAccountDir + "/" + caFileName)
	if err != nil {
		return nil, fmt.Errorf("read the API server's CA: %w (is the service account token mounted? automountServiceAccountToken must be true with a Node condition or a startup taint)", err)
	}
	return NewClient("https://"+net.JoinHostPort(host, port), ca, ServiceAccountDir+"/"+tokenFileName)
}

// NewClient returns a Client of the API server at baseURL (https://host:port),
// trusting the PEM certificates caPEM, authenticating with the bearer token
// in tokenFile.
func NewClient(baseURL string, caPEM []byte, tokenFile string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("API server URL %q: must be https://host:port", baseURL)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the API server's CA holds no PEM certificate")
	}
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &Client{base: u, http: &http.Client{Transport: tr}, tokenFile: tokenFile}, nil
}

// Close closes idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// APIError is an answer of the API server that is not a success.
type APIError struct {
	Method, Path string
	Code         int
	Reason       string // the Status's reason, e.g. Forbidden, NotFound, Conflict, Invalid
	Message      string // the Status's message
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsNotFound reports whether err is an API answer 404.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsForbidden reports whether err is an API answer 403.
func IsForbidden(err error) bool { return statusOf(err) == http.StatusForbidden }

func statusOf(err error) int {
	var a *APIError
	if errors.As(err, &a) {
		return a.Code
	}
	return 0
}

// do sends a request and decodes a 2xx JSON answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, contentType, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return apiError(method, path, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	token, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	u := *c.base
	p, q, _ := strings.Cut(path, "?")
	u.Path, u.RawQuery = p, q
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "csi-registrar")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp, nil
}

func apiError(method, path string, code int, data []byte) error {
	var st struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &st) != nil || st.Message == "" {
		st.Message = strings.TrimSpace(string(data))
		if len(st.Message) > 512 {
			st.Message = st.Message[:512] + "…"
		}
	}
	if st.Reason == "" {
		st.Reason = http.StatusText(code)
	}
	return &APIError{Method: method, Path: path, Code: code, Reason: st.Reason, Message: st.Message}
}

// The few fields of the API objects the Reporter reads.

// ObjectMeta is the part of an object's metadata the Reporter reads.
type ObjectMeta struct {
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Annotations     map[string]string `json:"annotations,omitempty"`
}

// Node is the part of a Node the Reporter reads.
type Node struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     struct {
		Taints []Taint `json:"taints,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions []Condition `json:"conditions,omitempty"`
	} `json:"status"`
}

// Taint is a Node's taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Condition is a Node condition, as the Reporter writes it.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastHeartbeatTime  string `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// condition returns the Node's condition of type t, nil if it has none.
func (n *Node) condition(t string) *Condition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// CSINode is the part of a CSINode the Reporter reads.
type CSINode struct {
	Metadata ObjectMeta `json:"metadata"`
	Spec     struct {
		Drivers []struct {
			Name   string `json:"name"`
			NodeID string `json:"nodeID"`
		} `json:"drivers"`
	} `json:"spec"`
}

const (
	nodesPath    = "/api/v1/nodes"
	csinodesPath = "/apis/storage.k8s.io/v1/csinodes"
)

// GetNode returns the Node name.
func (c *Client) GetNode(ctx context.Context, name string) (*Node, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var n Node
	if err := c.do(ctx, http.MethodGet, nodesPath+"/"+url.PathEscape(name), "", nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// GetCSINode returns the CSINode name.
func (c *Client) GetCSINode(ctx context.Context, name string) (*CSINode, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var n CSINode
	if err := c.do(ctx, http.MethodGet, csinodesPath+"/"+url.PathEscape(name), "", nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// PatchNodeConditions merges conds into the Node's status.conditions (a
// strategic merge patch of the nodes/status subresource: conditions merge
// by type, the others are left as they are).
func (c *Client) PatchNodeConditions(ctx context.Context, name string, conds ...Condition) (*Node, error) {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var n Node
	err = c.do(ctx, http.MethodPatch, nodesPath+"/"+url.PathEscape(name)+"/status", "application/strategic-merge-patch+json", body, &n)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// RemoveTaint removes the taint at index i of the Node's spec.taints, after
// the API server checked that it still has key there (a JSON patch with a
// test: a list changed in the meantime fails with 422 and nothing is
// written, so another writer's taint is never removed by mistake).
func (c *Client) RemoveTaint(ctx context.Context, name string, i int, key string) error {
	body, err := json.Marshal([]map[string]any{
		{"op": "test", "path": fmt.Sprintf("/spec/taints/%d/key", i), "value": key},
		{"op": "remove", "path": fmt.Sprintf("/spec/taints/%d", i)},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.do(ctx, http.MethodPatch, nodesPath+"/"+url.PathEscape(name), "application/json-patch+json", body, nil)
}

// watchEvent is one event of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch watches the object name of the collection at path from
// resourceVersion rv ("" : from now, with the object's current state first
// if it exists), calling f with each event's type and object until the
// stream ends (the server ends it after timeout), ctx ends, or f returns
// an error. An ERROR event (e.g. 410 Gone: rv is too old) is returned as
// an *APIError.
func (c *Client) watch(ctx context.Context, path, name, rv string, timeout time.Duration, f func(typ string, obj json.RawMessage) error) error {
	q := url.Values{}
	q.Set("watch", "true")
	q.Set("fieldSelector", "metadata.name="+name)
	q.Set("timeoutSeconds", fmt.Sprint(int(timeout.Seconds())))
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	full := path + "?" + q.Encode()
	resp, err := c.send(ctx, http.MethodGet, full, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return apiError(http.MethodGet, full, resp.StatusCode, data)
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w", path, err)
		}
		if ev.Type == "ERROR" {
			var st struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			return &APIError{Method: http.MethodGet, Path: full, Code: st.Code, Reason: st.Reason, Message: st.Message}
		}
		if err := f(ev.Type, ev.Object); err != nil {
			return err
		}
	}
}
