// Package assets holds Codexgate's icons, drawn by gen.go and embedded.
package assets

import _ "embed"

var (
	//go:embed tray-idle.png
	TrayIdle []byte
	//go:embed tray-working.png
	TrayWorking []byte
	//go:embed tray-waiting.png
	TrayWaiting []byte
	//go:embed Icon.png
	AppIcon []byte
)
