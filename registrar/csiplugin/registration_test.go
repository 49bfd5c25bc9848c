package csiplugin

import (
	"strings"
	"testing"
)

func TestParseNodeIDAnnotation(t *testing.T) {
	for value, want := range map[string]map[string]string{
		"":                         {},
		"null":                     {},
		"{}":                       {},
		`{"a.example.com":"n-1"}`:  {"a.example.com": "n-1"},
		`{"a":"n-1","b":"i-0abc"}`: {"a": "n-1", "b": "i-0abc"},
	} {
		got, err := ParseNodeIDAnnotation(value)
		if err != nil || got == nil || len(got) != len(want) {
			t.Errorf("ParseNodeIDAnnotation(%q) = %v, %v; want %v", value, got, err, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("ParseNodeIDAnnotation(%q)[%q] = %q, want %q", value, k, got[k], v)
			}
		}
	}
	for _, value := range []string{"not json", `["a"]`, `{"a":1}`, `{"a":"n"`} {
		got, err := ParseNodeIDAnnotation(value)
		if err == nil || got != nil || !strings.Contains(err.Error(), NodeIDAnnotation) {
			t.Errorf("ParseNodeIDAnnotation(%q) = %v, %v; want nil and an error naming the annotation", value, got, err)
		}
	}
}

func TestRegistration(t *testing.T) {
	for _, tc := range []struct {
		r       Registration
		problem string // "" when registered
	}{
		{Registration{InCSINode: true, CSINodeID: "n", Annotated: true, AnnotationID: "n"}, ""},
		{Registration{}, "no CSINode entry, no Node annotation"},
		{Registration{InCSINode: true, CSINodeID: "n"}, `the CSINode lists it (node ID "n"), the Node's annotation`},
		{Registration{Annotated: true, AnnotationID: "n"}, `names it (node ID "n"), the CSINode does not list it`},
		{Registration{InCSINode: true, Annotated: true}, "the CSINode entry has no node ID"},
		{Registration{InCSINode: true, CSINodeID: "n", Annotated: true, AnnotationID: "m"}, `disagree: node ID "n" vs "m"`},
		{Registration{InCSINode: true, CSINodeID: "n", Annotated: true}, `disagree: node ID "n" vs ""`},
	} {
		got := tc.r.Problem()
		if tc.r.Registered() != (tc.problem == "") || (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
			t.Errorf("%+v: Registered %v, Problem %q; want a problem containing %q", tc.r, tc.r.Registered(), got, tc.problem)
		}
	}
}
