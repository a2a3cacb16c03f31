// Command mcp-stdio-exec starts a stdio MCP server with its standard input and
// output on the FIFOs that the stdio->HTTP adapter holds, in a container that
// may have no shell at all (docs/managed-mode.md).
//
// It owns two things and nothing else:
//
//	mcp-stdio-exec --install=DIR
//	    copies its own executable to DIR/mcp-stdio-exec (the init container that
//	    puts the helper into the emptyDir the server container mounts);
//	mcp-stdio-exec --fifo-dir=DIR -- PROGRAM [ARG...]
//	    opens DIR/stdin for reading and DIR/stdout for writing (blocking, in this
//	    order, as the adapter expects), makes them file descriptors 0 and 1, and
//	    replaces itself with PROGRAM, found on PATH as a container runtime would.
//	    Standard error and the environment are left as they are; PROGRAM becomes
//	    PID 1 of the container, so it receives the kubelet's signals itself.
//	mcp-stdio-exec --spawn-socket=PATH -- PROGRAM [ARG...]
//	    one PROGRAM per connection (the adapter's --child-per-session): listens on
//	    the Unix socket PATH (mode 0666: the adapter may run as another UID), and
//	    for each connection starts PROGRAM in a process group of its own with its
//	    standard input and output on that connection (spawn.go).
//
// The FIFOs are made by the adapter's own init container; the protocol is the
// adapter's business. This program never reads or writes a byte of it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

const name = "mcp-stdio-exec"

func main() {
	install := flag.String("install", "", "copy this executable into `DIR` and exit")
	fifoDir := flag.String("fifo-dir", "", "`DIR` holding the stdin and stdout FIFOs")
	spawnSocket := flag.String("spawn-socket", "", "start PROGRAM once per connection to the Unix socket `PATH`")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s --install=DIR\n       %s --fifo-dir=DIR -- PROGRAM [ARG...]\n       %s --spawn-socket=PATH -- PROGRAM [ARG...]\n", name, name, name)
	}
	flag.Parse()
	switch {
	case *spawnSocket != "" && *install == "" && *fifoDir == "" && flag.NArg() > 0:
		spawn(*spawnSocket, flag.Args())
	case *install != "" && *fifoDir == "" && flag.NArg() == 0:
		if err := installSelf(*install); err != nil {
			fail(1, "Copying %s into %s failed: %v", name, *install, err)
		}
	case *fifoDir != "" && *install == "" && flag.NArg() > 0:
		run(*fifoDir, flag.Args())
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...)
	os.Exit(code)
}

// installSelf copies the running executable to dir, executable by every user
// (the server container may run as any UID), and atomically by a rename.
func installSelf(dir string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	temporary, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(temporary.Name())
	if _, err := io.Copy(temporary, self); err != nil {
		temporary.Close()
		return err
	}
	if err := temporary.Chmod(0o555); err != nil {
		temporary.Close()
		return err
	}
	if err := temporary.Close(); err != nil {
		return err
	}
	return os.Rename(temporary.Name(), filepath.Join(dir, name))
}

// run never returns: it becomes argv[0] or exits with the shell's codes (127
// not found, 126 found but not executable).
func run(fifoDir string, argv []string) {
	program, err := exec.LookPath(argv[0])
	if err != nil && !errors.Is(err, exec.ErrDot) {
		fail(127, "Finding %q on PATH failed: %v", argv[0], err)
	}
	// syscall.Open, not os.OpenFile: the os package would register a FIFO with Go's
	// poller and leave it non-blocking, and the server would inherit that.
	for fd, file := range []struct {
		path string
		mode int
	}{{"stdin", syscall.O_RDONLY}, {"stdout", syscall.O_WRONLY}} {
		path := filepath.Join(fifoDir, file.path)
		opened, err := syscall.Open(path, file.mode|syscall.O_CLOEXEC, 0)
		if err != nil {
			fail(1, "Opening %s failed: %v", path, err)
		}
		// Dup3 without O_CLOEXEC: descriptors 0 and 1 survive the exec below.
		if err := syscall.Dup3(opened, fd, 0); err != nil {
			fail(1, "Redirecting descriptor %d to %s failed: %v", fd, path, err)
		}
		syscall.Close(opened)
	}
	err = syscall.Exec(program, argv, os.Environ())
	fail(126, "Starting %s failed: %v", program, err)
}
