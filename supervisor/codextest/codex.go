package codextest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Root is the project's top directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// nativeCodex is the pinned CLI's native binary, which `make` installs. The
// Node wrapper in node_modules/.bin would leave this binary running when it
// is killed, so tests run the native one, as workers do.
const nativeCodex = ".tools/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

// Codex is the path of the pinned codex binary. The test fails when it is
// missing: `make test` installs it.
func Codex(t testing.TB) string {
	t.Helper()
	path := filepath.Join(Root(), nativeCodex)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the pinned codex is not installed (run make test): %v", err)
	}
	return path
}

// TempDir is a test directory outside /tmp: codex refuses to set up its
// sandbox helper under the temp dir, and /tmp is writable inside the
// workspace-write sandbox, which would make approvals moot.
func TempDir(t testing.TB) string {
	t.Helper()
	base := filepath.Join(Root(), ".tools", "test")
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Args are the app-server arguments that point codex at the fake endpoint.
func (r *Responses) Args(features ...string) []string {
	args := []string{
		"-c", `model_provider="mock"`,
		"-c", `model="gpt-5.5"`,
		"-c", `model_providers.mock={name="mock",base_url="` + r.URL + `",wire_api="responses",request_max_retries=0,stream_max_retries=0}`,
		"-c", "suppress_unstable_features_warning=true",
	}
	for _, f := range features {
		args = append(args, "--enable", f)
	}
	return args
}

// Env is the environment of a worker run against the fake endpoint: an
// isolated CODEX_HOME and a dummy key.
func Env(home string) map[string]string {
	return map[string]string{"CODEX_HOME": home, "OPENAI_API_KEY": "sk-test"}
}
