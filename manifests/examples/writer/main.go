// Command writer is the workload of the example pod in manifests/examples/:
// it writes one file into the CSI ephemeral volume mounted at /data, says so
// on stdout, and waits for SIGTERM or SIGINT, then exits 0.
//
// The file names the pod (from the downward API variables POD_NAMESPACE,
// POD_NAME and POD_UID), so that the copy in the driver's state directory on
// the node can be traced to the pod that wrote it. It is a static binary in a
// FROM-scratch image (see build-image.sh): nothing is pulled.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// defaultFile is where the example pod mounts its inline volume, and the file.
const defaultFile = "/data/hello.txt"

func main() {
	// Catch the signals first: a SIGTERM that arrives while writing still
	// ends in a clean exit.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	file := defaultFile
	if len(os.Args) > 1 {
		file = os.Args[1]
	}
	content := fmt.Sprintf("written by pod %s/%s uid %s\n", os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME"), os.Getenv("POD_UID"))
	if err := write(file, content); err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s: %s", file, content)

	sig := <-sigs
	fmt.Printf("%v received, exiting\n", sig)
}

// write puts content into file through a temporary file and a rename, so a
// reader never sees half of it.
func write(file, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".hello-*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), file)
}
