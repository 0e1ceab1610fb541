package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"codexgate/supervisor/codextest"
)

// secretValue is what the tests store; it must turn up nowhere but in the
// keyring and in codex's own environment.
const secretValue = "sk-test-4f9c2e7a-never-in-a-file"

func (a *testApp) withStdin(stdin string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = a.env
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSecretsStayInTheKeyring(t *testing.T) {
	a := newApp(t)
	if out, err := a.withStdin(secretValue+"\n", "secret", "set", "my-provider"); err != nil {
		t.Fatalf("secret set: %v %s", err, out)
	}
	out, err := exec.Command("secret-tool", "lookup", "service", "codexgate", "username", "my-provider").Output()
	if err != nil || string(out) != secretValue {
		t.Fatalf("secret-tool lookup = %q, %v", out, err)
	}
	if out, _ := a.withStdin("", "secret", "list"); strings.TrimSpace(out) != "my-provider" {
		t.Errorf("secret list = %q", out)
	}

	// A worker gets the secret in codex's environment; the agent's `env`
	// does not show it.
	ws := a.start(workerDef{name: "env", secrets: map[string]string{"MY_PROVIDER_KEY": "my-provider"},
		steps: []codextest.Step{codextest.Exec("env", false)}})
	pid := a.statuses()["env"].PID
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if !strings.Contains(string(environ), "MY_PROVIDER_KEY="+secretValue) {
		t.Error("codex did not get the secret in its environment")
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if strings.Contains(string(cmdline), secretValue) {
		t.Error("the secret is on codex's command line")
	}
	a.must("task", "env", "print the environment")
	a.waitFor("the env output to reach the model", func() bool { return len(a.responses["env"].Requests()) >= 2 })
	a.idle("env")
	var sawEnv bool
	for _, req := range a.responses["env"].Requests() {
		if strings.Contains(string(req), secretValue) {
			t.Error("the agent's env printed the secret")
		}
		sawEnv = sawEnv || strings.Contains(string(req), "PATH=")
	}
	if !sawEnv {
		t.Error("the env command's output never reached the model")
	}
	for _, dir := range []string{filepath.Join(a.dir, "config"), filepath.Join(a.dir, "state"), a.cfgPath, ws["env"]} {
		filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				if raw, _ := os.ReadFile(path); strings.Contains(string(raw), secretValue) {
					t.Errorf("%s holds the secret", path)
				}
			}
			return nil
		})
	}
	if strings.Contains(a.log.String(), secretValue) {
		t.Error("the log holds the secret")
	}
	if out, err := a.withStdin("", "secret", "rm", "my-provider"); err != nil {
		t.Fatalf("secret rm: %v %s", err, out)
	}
	if out, _ := a.withStdin("", "secret", "list"); strings.TrimSpace(out) != "" {
		t.Errorf("secret list after rm = %q", out)
	}
}

func TestSecretsWithoutAKeyring(t *testing.T) {
	a := newApp(t)
	a.env = append(a.env, "DBUS_SESSION_BUS_ADDRESS=unix:path="+filepath.Join(a.dir, "no-bus"))
	out, err := a.withStdin(secretValue, "secret", "set", "my-provider")
	if err == nil || !strings.Contains(out, "no OS keyring") || !strings.Contains(out, "Secret Service") {
		t.Errorf("secret set without a keyring: %v %q", err, out)
	}
	filepath.Walk(a.dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if raw, _ := os.ReadFile(path); strings.Contains(string(raw), secretValue) {
				t.Errorf("%s holds the secret", path)
			}
		}
		return nil
	})
}

func TestLoginGivesWorkersTheKeyThroughTheProtocol(t *testing.T) {
	a := newApp(t)
	ws := a.start(workerDef{name: "w"})
	before := a.statuses()["w"].PID
	out, err := a.withStdin(secretValue+"\n", "--socket", a.socket, "login")
	if err != nil || !strings.Contains(out, "w: idle") {
		t.Fatalf("login: %v %s\n%s", err, out, a.log)
	}
	after := a.statuses()["w"]
	if after.PID == before || !strings.Contains(a.log.String(), "logged in with the API key from the keyring") {
		t.Fatalf("the worker did not restart and log in: %+v\n%s", after, a.log)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(after.PID) + "/cmdline")
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(after.PID) + "/environ")
	if strings.Contains(string(cmdline), secretValue) || strings.Contains(string(environ), secretValue) {
		t.Error("the API key is on codex's command line or in its environment")
	}
	if !strings.Contains(string(cmdline), `cli_auth_credentials_store="ephemeral"`) {
		t.Errorf("codex may store the key itself: %q", cmdline)
	}
	for _, dir := range []string{a.dir, ws["w"]} {
		filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				if raw, _ := os.ReadFile(path); strings.Contains(string(raw), secretValue) {
					t.Errorf("%s holds the API key", path)
				}
			}
			return nil
		})
	}
	if out, err := a.withStdin("", "--socket", a.socket, "logout"); err != nil {
		t.Fatalf("logout: %v %s", err, out)
	}
}
