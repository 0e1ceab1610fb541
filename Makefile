# Codexgate. `make run` and `make test` install what is missing first.

CODEX_VERSION := 0.171.0
TOOLS         := .tools
CODEX_NATIVE  := $(TOOLS)/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
BIN           := bin/codexgate
VERSION       := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS       := -X main.version=$(VERSION) -X main.pinnedCodex=$(abspath $(CODEX_NATIVE))

# Debian packages: cgo and OpenGL for Fyne, bubblewrap for codex's sandbox,
# and the desktop services the tests start on their own.
APT_BUILD := gcc libgl1-mesa-dev xorg-dev bubblewrap
APT_TEST  := xvfb dbus dbus-x11 dunst gnome-keyring libsecret-tools xdotool x11-utils imagemagick \
             haskell-status-notifier-item-utils haskell-gtk-sni-tray-utils \
             kwin-wayland xdg-desktop-portal xdg-desktop-portal-kde qtwayland5 \
             plasma-wayland-protocols libwayland-bin libwayland-dev

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run build test bench schema deps test-deps codex check clean

run: deps build
	./$(BIN)

# The app (no Fyne, no OpenGL) and the panel it starts on demand, side by
# side: codexgate finds the panel beside itself.
build: $(CODEX_NATIVE)
	go build -ldflags '$(LDFLAGS)' -o $(BIN) .
	go build -o bin/codexgate-panel ./cmd/codexgate-panel

# The end-to-end tests run what `make build` made.
test: deps test-deps build
	go vet ./...
	./scripts/testenv go test -race -count=1 -timeout 30m ./...

bench: deps test-deps build
	go test -run '^$$' -bench . -benchmem ./approvals/... ./supervisor/...
	./scripts/testenv go test -run '^$$' -bench 'IdleDesktop|PanelFirstFrame|CardToNotify' -benchtime 1x .

# The protocol schema of the pinned CLI, committed for the tests.
schema: $(CODEX_NATIVE)
	rm -rf supervisor/testdata/schema
	$(CODEX_NATIVE) app-server generate-json-schema --out supervisor/testdata/schema

deps: codex
	@./scripts/apt-install $(APT_BUILD)

test-deps:
	@./scripts/apt-install $(APT_TEST)

codex: $(CODEX_NATIVE)

$(CODEX_NATIVE):
	@command -v npm >/dev/null || ./scripts/apt-install nodejs npm
	mkdir -p $(TOOLS)
	npm install --prefix $(TOOLS) --no-audit --no-fund --no-save @openai/codex@$(CODEX_VERSION)
	@test -x $@ || { echo "the pinned codex has no native binary at $@" >&2; exit 1; }

clean:
	rm -rf bin
