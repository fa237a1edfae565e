package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Run(runCtx, []string{"--listen", "127.0.0.1:0", "--dump", t.TempDir()}, pw, io.Discard)
		pw.Close()
		done <- err
	}()

	url, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("read URL: %v", err)
	}
	url = strings.TrimSpace(url)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages",
		strings.NewReader(`{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Hello from the fake model.") {
		t.Errorf("reply %d %s", resp.StatusCode, body)
	}

	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
