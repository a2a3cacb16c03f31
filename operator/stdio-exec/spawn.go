package main

// The --spawn-socket mode: one server process per connection, for the adapter's
// --child-per-session in a managed Pod, where the server's image is not the
// adapter's and only this helper can start the server's program.
//
// Each accepted connection becomes one child's standard input and output. The
// child runs in a process group of its own; when the adapter closes the
// connection (the session ended), the child gets end-of-file on its stdin and,
// should it not exit by itself, SIGTERM to its group and SIGKILL after a grace.
// On SIGTERM the helper does the same to every child and exits. The protocol is
// the adapter's business: this program never reads or writes a byte of it.

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

const killGrace = 5 * time.Second

func spawn(socketPath string, argv []string) {
	program, err := exec.LookPath(argv[0])
	if err != nil && !errors.Is(err, exec.ErrDot) {
		fail(127, "Finding %q on PATH failed: %v", argv[0], err)
	}
	_ = os.Remove(socketPath) // a socket left by an earlier run of this container
	listener, err := net.Listen("unix", socketPath)
	if err != nil {
		fail(1, "Listening on %s failed: %v", socketPath, err)
	}
	if err := os.Chmod(socketPath, 0o666); err != nil {
		fail(1, "Opening %s to the adapter failed: %v", socketPath, err)
	}
	var mu sync.Mutex
	groups := map[int]bool{}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		listener.Close()
		mu.Lock()
		for pgid := range groups {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
		}
		mu.Unlock()
		time.Sleep(killGrace)
		mu.Lock()
		for pgid := range groups {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		mu.Unlock()
		os.Exit(0)
	}()
	for {
		conn, err := listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				select {} // shutting down: the signal handler exits
			}
			continue
		}
		go serveChild(conn.(*net.UnixConn), program, argv, &mu, groups)
	}
}

func serveChild(conn *net.UnixConn, program string, argv []string, mu *sync.Mutex, groups map[int]bool) {
	defer conn.Close()
	file, err := conn.File() // a blocking duplicate: the child's stdin and stdout
	if err != nil {
		return
	}
	cmd := &exec.Cmd{
		Path:        program,
		Args:        argv,
		Env:         os.Environ(),
		Stdin:       file,
		Stdout:      file,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	file.Close()
	if err != nil {
		return // the adapter sees end-of-file: the child did not start
	}
	pgid := cmd.Process.Pid
	mu.Lock()
	groups[pgid] = true
	mu.Unlock()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	hungUp, stopWatching := hangUp(conn)
	defer stopWatching()
	select {
	case <-exited:
	case <-hungUp:
		select {
		case <-exited:
		case <-time.After(killGrace):
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(killGrace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-exited
			}
		}
	}
	mu.Lock()
	delete(groups, pgid)
	mu.Unlock()
}

// hangUp is closed when the adapter closes its end of the connection; it waits
// with epoll for EPOLLRDHUP alone, so that it never reads the child's input.
// stop ends the wait (the child exited first).
func hangUp(conn *net.UnixConn) (hungUp <-chan struct{}, stop func()) {
	done := make(chan struct{})
	var pipe [2]int
	if err := syscall.Pipe2(pipe[:], syscall.O_CLOEXEC); err != nil {
		return done, func() {}
	}
	raw, err := conn.SyscallConn()
	fd := -1
	if err == nil {
		_ = raw.Control(func(descriptor uintptr) { fd, _ = syscall.Dup(int(descriptor)) })
	}
	go func() {
		defer close(done)
		defer syscall.Close(pipe[0])
		if fd < 0 {
			return
		}
		defer syscall.Close(fd)
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		defer syscall.Close(epfd)
		watch := []syscall.EpollEvent{
			{Events: syscall.EPOLLRDHUP, Fd: int32(fd)},
			{Events: syscall.EPOLLIN, Fd: int32(pipe[0])},
		}
		for i := range watch {
			if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(watch[i].Fd), &watch[i]); err != nil {
				return
			}
		}
		events := make([]syscall.EpollEvent, 2)
		for {
			n, err := syscall.EpollWait(epfd, events, -1)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || n > 0 {
				return
			}
		}
	}()
	var once sync.Once
	return done, func() { once.Do(func() { syscall.Close(pipe[1]) }) }
}
