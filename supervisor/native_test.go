package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNativeCodexBehindTheNodeWrapper(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	modules := filepath.Join(root, "node_modules")
	wrapper := filepath.Join(modules, "@openai", "codex", "bin", "codex.js")
	native := filepath.Join(modules, "@openai", "codex-linux-x64", "vendor", "x86_64-unknown-linux-musl", "bin", "codex")
	for _, f := range []string{wrapper, native} {
		os.MkdirAll(filepath.Dir(f), 0o755)
		os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755)
	}
	bin := filepath.Join(modules, ".bin", "codex")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.Symlink("../@openai/codex/bin/codex.js", bin); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		bin:                      native, // node_modules/.bin/codex
		wrapper:                  native,
		native:                   native,
		"/usr/local/bin/codex-x": "/usr/local/bin/codex-x", // not a wrapper: as configured
	} {
		if got := NativeCodex(in); got != want {
			t.Errorf("NativeCodex(%s) = %s, want %s", in, got, want)
		}
	}
}
