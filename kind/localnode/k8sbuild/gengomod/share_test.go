package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestShareTools(t *testing.T) {
	root := t.TempDir()
	shared := []byte("//go:build tools\n\npackage k8sbuild\n")
	if err := os.WriteFile(filepath.Join(root, sharedTools), shared, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		release string
		tools   []byte
		link    bool
	}{
		{"1.37", shared, true},
		{"1.34", []byte("//go:build tools\n\npackage other\n"), false},
	} {
		out := filepath.Join(root, tc.release)
		file := filepath.Join(out, "tools.go")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, tc.tools, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := shareTools(out); err != nil {
			t.Fatalf("%s: shareTools: %v", tc.release, err)
		}
		target, err := os.Readlink(file)
		if tc.link && target != filepath.Join("..", sharedTools) {
			t.Errorf("%s: tools.go links to %q (%v), want ../%s", tc.release, target, err, sharedTools)
		}
		if !tc.link && err == nil {
			t.Errorf("%s: tools.go differs from %s but links to %q", tc.release, sharedTools, target)
		}
		if got, err := os.ReadFile(file); err != nil || string(got) != string(tc.tools) {
			t.Errorf("%s: tools.go reads %q, %v; want %q", tc.release, got, err, tc.tools)
		}
	}
}
