package tests

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestAPIPortFloodStaysBounded replays, against an orchestrator process, the
// attack that took the API down without a token: 200 connections to the API
// port, half idle keep-alives after one GET /livez, half sending their headers
// slowly. The orchestrator (max_connections 16, idle and header timeouts of 1 s)
// holds no more of them open than its cap and overflow, closes every one within
// its timeout, and answers the API afterwards. Before http.limits, each stayed
// open for good: 200 more open files, and none closed.
func TestAPIPortFloodStaysBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc to count the orchestrator's open files")
	}
	const max, overflow = 16, 8 // overflow: max(8, max/8)
	c := newCluster(t, 1)
	c.httpLimits = "max_connections: " + strconv.Itoa(max) + ", idle_timeout: 1s, read_header_timeout: 1s, read_timeout: 2s"
	c.writeOrchConfig()
	c.start()
	openFiles := func() int {
		entries, err := os.ReadDir("/proc/" + strconv.Itoa(c.orch.pid()) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := openFiles()

	const n = 200
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for i := range n {
		conn, err := net.Dial("tcp", c.httpAddr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, conn)
		if i%2 == 1 { // slow headers
			_, _ = io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: chiffon\r\n")
			continue
		}
		// An idle keep-alive: one request answered, then nothing. A connection
		// the orchestrator closed at once (past its cap) answers nothing.
		if _, err := io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: chiffon\r\n\r\n"); err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	// Every answered idle connection was accepted before this count: without a
	// cap they would all be open files of the orchestrator now.
	if held := openFiles() - before; held > max+overflow {
		t.Errorf("the orchestrator holds %d more open files during the flood, want at most %d (max_connections and its overflow)",
			held, max+overflow)
	}
	// Each connection is closed by the orchestrator within its timeout.
	deadline := time.Now().Add(15 * time.Second)
	for i, conn := range conns {
		_ = conn.SetReadDeadline(deadline)
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection %d still open 15 s after the flood began", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.client.Agents(ctx); err != nil {
		t.Fatalf("the API after the flood: %v", err)
	}
}
