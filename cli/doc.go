// Package cli is Codexgate's command line: with no command it runs the app
// (package app); every other command is a client of the running app's
// control socket, or of the OS keyring for secrets. It links no Fyne.
package cli
