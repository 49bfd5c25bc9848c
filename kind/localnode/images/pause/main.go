// Command pause is the pod sandbox ("infra") container of the local node.
//
// No image can be pulled on the machines this project runs on, so the node's
// containerd uses this instead of registry.k8s.io/pause. It is a static binary in a
// FROM-scratch image (see ../build-pause.sh). As the first process of the pod it
// holds the namespaces, reaps orphaned children (it is PID 1 when the pod shares
// its PID namespace) and exits cleanly on SIGINT/SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (csi-registrar localnode)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
