/*
 * kde-fake-key presses keys in a KWin Wayland session through KWin's
 * org_kde_kwin_fake_input (version 4 has keyboard_key), as a person at the
 * keyboard would: "kde-fake-key ctrl+alt+n" presses Ctrl, Alt and N in
 * order and releases them in reverse. KWin offers the interface only to a
 * program named by a .desktop file with
 * X-KDE-Wayland-Interfaces=org_kde_kwin_fake_input; scripts/kde-session
 * builds this and writes that file.
 */
#include <linux/input-event-codes.h>
#include <stdio.h>
#include <string.h>
#include <wayland-client.h>

#include "fake-input-client.h"

static struct org_kde_kwin_fake_input *fake;

static void global(void *data, struct wl_registry *registry, uint32_t name, const char *interface, uint32_t version)
{
	if (strcmp(interface, org_kde_kwin_fake_input_interface.name) == 0 && version >= 4)
		fake = wl_registry_bind(registry, name, &org_kde_kwin_fake_input_interface, 4);
}

static void global_remove(void *data, struct wl_registry *registry, uint32_t name) {}

static const struct wl_registry_listener listener = {global, global_remove};

static const struct {
	const char *name;
	unsigned code;
} keys[] = {
	{"ctrl", KEY_LEFTCTRL}, {"alt", KEY_LEFTALT}, {"shift", KEY_LEFTSHIFT}, {"super", KEY_LEFTMETA},
	{"a", KEY_A}, {"b", KEY_B}, {"c", KEY_C}, {"d", KEY_D}, {"e", KEY_E}, {"f", KEY_F}, {"g", KEY_G},
	{"h", KEY_H}, {"i", KEY_I}, {"j", KEY_J}, {"k", KEY_K}, {"l", KEY_L}, {"m", KEY_M}, {"n", KEY_N},
	{"o", KEY_O}, {"p", KEY_P}, {"q", KEY_Q}, {"r", KEY_R}, {"s", KEY_S}, {"t", KEY_T}, {"u", KEY_U},
	{"v", KEY_V}, {"w", KEY_W}, {"x", KEY_X}, {"y", KEY_Y}, {"z", KEY_Z},
};

static int code(const char *name)
{
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (strcmp(keys[i].name, name) == 0)
			return keys[i].code;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: kde-fake-key KEY[+KEY...], e.g. ctrl+alt+n\n");
		return 2;
	}
	int codes[8], n = 0;
	char spec[64];
	snprintf(spec, sizeof spec, "%s", argv[1]);
	for (char *k = strtok(spec, "+"); k; k = strtok(NULL, "+")) {
		if (n == 8 || (codes[n] = code(k)) < 0) {
			fprintf(stderr, "kde-fake-key: unknown key %s\n", k);
			return 2;
		}
		n++;
	}
	struct wl_display *display = wl_display_connect(NULL);
	if (!display) {
		fprintf(stderr, "kde-fake-key: no Wayland display\n");
		return 1;
	}
	struct wl_registry *registry = wl_display_get_registry(display);
	wl_registry_add_listener(registry, &listener, NULL);
	wl_display_roundtrip(display);
	if (!fake) {
		fprintf(stderr, "kde-fake-key: the compositor offers no org_kde_kwin_fake_input v4 to this program\n");
		return 1;
	}
	org_kde_kwin_fake_input_authenticate(fake, "kde-fake-key", "tests press keys");
	for (int i = 0; i < n; i++) {
		org_kde_kwin_fake_input_keyboard_key(fake, codes[i], WL_KEYBOARD_KEY_STATE_PRESSED);
		wl_display_roundtrip(display);
	}
	for (int i = n - 1; i >= 0; i--) {
		org_kde_kwin_fake_input_keyboard_key(fake, codes[i], WL_KEYBOARD_KEY_STATE_RELEASED);
		wl_display_roundtrip(display);
	}
	wl_display_disconnect(display);
	return 0;
}
