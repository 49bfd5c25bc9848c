package clusterstatus

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakeclient "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestForbiddenListIsUnknown: a kind the API server refuses to list is an
// unknown part naming the permission; the other kinds are still read, and
// the command exits 3 when nothing else is wrong. The client is
// client-go's fake clientset (no API server runs in unit tests; the e2e
// suites run the command against real ones).
func TestForbiddenListIsUnknown(t *testing.T) {
	client := fakeclient.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
	})
	r, err := Status(context.Background(), client, Options{ProxyTimeout: DefaultProxyTimeout, ProxyConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Unknown) != 1 || r.Unknown[0].Permission != "list pods (in all namespaces)" || r.Nodes != 1 {
		t.Fatalf("unknown %+v, nodes %d: want the pods list, with its permission, and the node read", r.Unknown, r.Nodes)
	}
	if r.ExitCode() != ExitIncomplete {
		t.Errorf("exit %d, want %d", r.ExitCode(), ExitIncomplete)
	}
	var out bytes.Buffer
	if _, err := (&Printer{Out: &out}).Print(r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The answer is incomplete", "missing permission: list pods (in all namespaces)", "node plugin pods are not known"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPrinterWatch: watching, the table's header is written once and then
// only the rows that changed.
func TestPrinterWatch(t *testing.T) {
	r := &Report{Drivers: []Driver{{Name: stub, Expected: 2, Registered: 2, Nodes: []Node{{Name: "a", State: StateRegistered}, {Name: "b", State: StateRegistered}}}}}
	var out bytes.Buffer
	p := &Printer{Format: OutputWide, Out: &out}
	p.Print(r, true)
	r.Drivers[0].Nodes[1] = Node{Name: "b", State: StateNotRegistered, Reason: "pod missing"}
	p.Print(r, true)
	if wrote, _ := p.Print(r, true); wrote {
		t.Errorf("nothing changed, yet it wrote")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "DRIVER") || !strings.Contains(lines[3], "not registered") || !strings.Contains(lines[3], "pod missing") {
		t.Errorf("want header, a, b, then b changed:\n%s", out.String())
	}
}
