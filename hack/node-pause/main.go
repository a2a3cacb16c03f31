// The local cluster node's Pod sandbox ("pause") program: it holds a Pod's
// namespaces as its first process, reaps the orphans handed to it, and exits
// on SIGINT or SIGTERM. Built by hack/build-node.sh into a one-file image that
// the node pushes into its own registry (operator/mcp_operator/dev/node_registry.py).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 8)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
