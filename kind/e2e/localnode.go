//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// localProvider drives the local node of kind/localnode: a real kubelet on
// this host, so node files are host files. Its scripts do the work; env.sh is
// the single source of truth for paths.
type localProvider struct {
	localEnv
	root    string // repository root
	scripts string // kind/localnode
}

func newLocalProvider(root string) (*localProvider, error) {
	p := &localProvider{root: root, scripts: filepath.Join(root, "kind", "localnode")}
	env, err := readLocalEnv(p.scripts)
	if err != nil {
		return nil, err
	}
	p.localEnv = env
	return p, nil
}

func (p *localProvider) Name() string       { return "local" }
func (p *localProvider) Kubeconfig() string { return p.kubeconfig }
func (p *localProvider) Kubectl() string    { return p.kubectl }

// run runs a command with its output going to the test log (stdout/stderr of
// the test binary), and returns an error that carries the exit status.
func (p *localProvider) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = p.root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// Up asks status.sh whether the node is up (its exit status), then runs
// up.sh, which does nothing more than check an up node.
func (p *localProvider) Up(ctx context.Context) (bool, error) {
	status := exec.CommandContext(ctx, "bash", filepath.Join(p.scripts, "status.sh"))
	status.Dir = p.root
	wasUp := status.Run() == nil
	if err := p.run(ctx, "bash", filepath.Join(p.scripts, "up.sh")); err != nil {
		return false, err
	}
	return !wasUp, nil
}

func (p *localProvider) Down(ctx context.Context) error {
	return p.run(ctx, "bash", filepath.Join(p.scripts, "down.sh"))
}

func (p *localProvider) LoadImage(ctx context.Context, archive string) error {
	return p.run(ctx, "bash", filepath.Join(p.scripts, "load-image.sh"), archive)
}

func (p *localProvider) checkNode(node string) error {
	if node != p.node {
		return fmt.Errorf("the local node is %q, not %q", p.node, node)
	}
	return nil
}

func (p *localProvider) RestartKubelet(ctx context.Context, node string) error {
	if err := p.checkNode(node); err != nil {
		return err
	}
	return p.run(ctx, "bash", filepath.Join(p.scripts, "restart-kubelet.sh"), "--no-wait-ready")
}

// RemoveFile: the node is this host.
func (p *localProvider) RemoveFile(_ context.Context, node, path string) error {
	if err := p.checkNode(node); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (p *localProvider) PluginsRegistry(_ context.Context, node string) ([]NodeFile, error) {
	if err := p.checkNode(node); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(PluginsRegistry)
	if err != nil {
		return nil, err
	}
	var files []NodeFile
	for _, e := range entries {
		st, err := os.Lstat(filepath.Join(PluginsRegistry, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			return nil, err
		}
		f := NodeFile{Name: e.Name(), Socket: st.Mode().Type() == fs.ModeSocket}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			f.File = csiplugin.FileID{Dev: sys.Dev, Ino: sys.Ino}
			f.Ctime = fmt.Sprintf("%d.%09d", sys.Ctim.Sec, sys.Ctim.Nsec)
		}
		files = append(files, f)
	}
	return files, nil
}

func (p *localProvider) KillContainer(ctx context.Context, node, id string) error {
	if err := p.checkNode(node); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", p.containerd, "--namespace", "k8s.io",
		"task", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr task kill %s: %w: %s", id, err, out)
	}
	return nil
}

// KubeletLog is the tail of the kubelet's log file; after a restart the
// previous run's log (kubelet.log.1) comes first when the current one is short.
func (p *localProvider) KubeletLog(_ context.Context, node string, lines int) (string, error) {
	if err := p.checkNode(node); err != nil {
		return "", err
	}
	logs := filepath.Join(p.cache, "logs")
	cur, err := os.ReadFile(filepath.Join(logs, "kubelet.log"))
	if err != nil {
		return "", err
	}
	all := strings.Split(strings.TrimRight(string(cur), "\n"), "\n")
	if len(all) < lines {
		if prev, err := os.ReadFile(filepath.Join(logs, "kubelet.log.1")); err == nil {
			p := strings.Split(strings.TrimRight(string(prev), "\n"), "\n")
			all = append(append(p, "---- kubelet restarted: kubelet.log ----"), all...)
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n") + "\n", nil
}
