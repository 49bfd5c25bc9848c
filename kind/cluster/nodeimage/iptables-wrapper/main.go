// Command iptables-wrapper picks the iptables back end (legacy or nft) of the
// node it runs on, for the slim kube-proxy image of kind/cluster/nodeimage.
//
// kube-proxy runs in the node's network namespace but in its own image, which
// has both back ends (xtables-legacy-multi and xtables-nft-multi). It must write
// its rules with the back end the node's kubelet and CNI plugins use, or packets
// meet two rule sets and service addresses do not answer. kind's entrypoint picks
// the node's back end when the node starts; the kubelet then creates its
// KUBE-IPTABLES-HINT and KUBE-KUBELET-CANARY chains with it. This program is
// installed as /usr/sbin/iptables, iptables-save, iptables-restore and their ip6
// names. On its first run it looks for those chains in each back end (falling
// back to the back end with more rules), points every name at the chosen
// xtables multi binary, so later calls go there directly, and execs it.
//
// It does what the upstream kube-proxy image's iptables-wrapper does; that
// project cannot be fetched without a registry or source host, so this is the
// small part of it that a kind node needs.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

const sbin = "/usr/sbin"

func main() {
	if err := run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "iptables-wrapper: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	mode := detect()
	multi := filepath.Join(sbin, "xtables-"+mode+"-multi")
	if err := repoint(multi); err != nil {
		// Not fatal: the next call detects again.
		fmt.Fprintf(os.Stderr, "iptables-wrapper: %v\n", err)
	}
	argv := append([]string{filepath.Base(args[0])}, args[1:]...)
	return syscall.Exec(multi, argv, os.Environ())
}

// detect returns "nft" or "legacy": the back end holding the kubelet's hint
// chains, else the one with more rules, else legacy (as kind's entrypoint).
func detect() string {
	nft, legacy := save("nft"), save("legacy")
	for _, hint := range [][]byte{[]byte(":KUBE-IPTABLES-HINT "), []byte(":KUBE-KUBELET-CANARY ")} {
		switch {
		case bytes.Contains(nft, hint):
			return "nft"
		case bytes.Contains(legacy, hint):
			return "legacy"
		}
	}
	if rules(nft) > rules(legacy) {
		return "nft"
	}
	return "legacy"
}

// save returns the IPv4 and IPv6 rule sets of one back end (empty on error).
func save(mode string) []byte {
	var out []byte
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		c := exec.Command(filepath.Join(sbin, "xtables-"+mode+"-multi"), cmd)
		b, _ := c.Output()
		out = append(out, b...)
	}
	return out
}

func rules(save []byte) int {
	n := 0
	for _, l := range bytes.Split(save, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("-")) {
			n++
		}
	}
	return n
}

// repoint replaces each name's link to the wrapper with a link to multi.
func repoint(multi string) error {
	for _, n := range []string{
		"iptables", "iptables-save", "iptables-restore",
		"ip6tables", "ip6tables-save", "ip6tables-restore",
	} {
		p := filepath.Join(sbin, n)
		tmp := p + ".wrapper-tmp"
		_ = os.Remove(tmp)
		if err := os.Symlink(filepath.Base(multi), tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	return nil
}
