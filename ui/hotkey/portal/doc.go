// Package portal binds Codexgate's global hotkeys through the desktop portal
// org.freedesktop.portal.GlobalShortcuts, the way a Wayland session offers
// global keys: the compositor owns the keyboard, so an application asks it
// to bind shortcuts, and the compositor (or the person, in its dialog)
// decides which keys they get.
//
// Shortcuts binds once when it opens and keeps the binding for its life:
// activations are passed on only while wanted (a card is open), because
// binding again for every card could raise a dialog each time; a key held
// down answers once, as with X11 grabs. The keys the compositor assigned,
// and any later change to them, are logged and kept for Triggers.
//
// Shortcuts owns two goroutines, both ended by Close: one reads the
// signals of its connection, one creates the session and binds. The fake
// portal for tests is in portaltest.
package portal
