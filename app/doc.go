// Package app is the long-lived Codexgate process, wired: the config and
// its watcher, the card queue and its audit log, the supervisor of the
// workers, the control socket and, unless headless, the desktop (tray,
// notifications, hotkeys, the panel started on demand). It links no Fyne.
//
// It answers the control socket's requests (handle), applies config
// reloads, and is the UI's Backend. Run owns every goroutine it starts and
// stops the workers before it returns.
package app
