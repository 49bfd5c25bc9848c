package drivercases

import (
	"io"
	"strings"
	"testing"
)

func TestCheckFatalEndsTheCaseAndRunsCleanups(t *testing.T) {
	var b strings.Builder
	c := &check{name: "x", out: &b}
	var order []string
	c.run(func(c *check) {
		c.Cleanup(func() { order = append(order, "first") })
		c.Cleanup(func() { order = append(order, "second") })
		c.Errorf("soft %d", 1)
		c.Fatalf("hard")
		order = append(order, "after fatal")
	})
	if !c.failed || c.skipped {
		t.Errorf("failed %v skipped %v, want failed", c.failed, c.skipped)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Errorf("order %v, want the cleanups in reverse and nothing after Fatalf", order)
	}
	if !strings.Contains(b.String(), "FAIL: soft 1") || !strings.Contains(b.String(), "FAIL: hard") {
		t.Errorf("log %q", b.String())
	}
}

func TestCheckSkip(t *testing.T) {
	c := &check{name: "x", out: io.Discard}
	c.run(func(c *check) { c.Skipf("no") })
	if !c.skipped || c.failed {
		t.Errorf("skipped %v failed %v", c.skipped, c.failed)
	}
}

func TestCheckOtherPanicsGoOn(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want boom", r)
		}
	}()
	c := &check{name: "x", out: io.Discard}
	c.run(func(*check) { panic("boom") })
}
