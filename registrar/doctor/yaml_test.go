package doctor

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseYAML: the kubeconfig subset, as kubectl, kubeadm and hand
// editors write it.
func TestParseYAML(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     any
	}{
		{"kubectl style", `apiVersion: v1
clusters:
- cluster:
    server: https://127.0.0.1:6443
  name: c
contexts:
- context: {}
  name: x
preferences: {}
users: []
`, map[string]any{"apiVersion": "v1",
			"clusters":    []any{map[string]any{"cluster": map[string]any{"server": "https://127.0.0.1:6443"}, "name": "c"}},
			"contexts":    []any{map[string]any{"context": map[string]any{}, "name": "x"}},
			"preferences": map[string]any{}, "users": []any{}}},
		{"indented sequence, comments, quotes", `# head
users:
  - name: "a # not a comment"   # a comment
    user:
      token: 'it''s'
      password: "q\"x"
  -
    name: b
empty:
`, map[string]any{"users": []any{
			map[string]any{"name": "a # not a comment", "user": map[string]any{"token": "it's", "password": `q"x`}},
			map[string]any{"name": "b"}}, "empty": nil}},
		{"scalar list", "a:\n- x\n- 'y'\n", map[string]any{"a": []any{"x", "y"}}},
		{"JSON document", `{"current-context": "x", "n": [1]}`, map[string]any{"current-context": "x", "n": []any{1.0}}},
		{"value with colon", "server: https://h:6443\nk: a:b\n", map[string]any{"server": "https://h:6443", "k": "a:b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseYAML([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
	for in, want := range map[string]string{
		"a: |\n  x\n":    "block scalars",
		"a: &x 1\n":      "anchors",
		"a:\n\t- b\n":    "tab",
		"a: 1\n  b: 2\n": "line 2",
		"a: \"open\n":    "unterminated",
		"- a\nb: 1\n":    "line 2",
	} {
		if _, err := parseYAML([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want an error containing %q, got %v", in, want, err)
		}
	}
}
