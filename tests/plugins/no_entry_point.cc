// Test-only shared library without accelopt_plugin_info(): not a plugin.
extern "C" int some_other_symbol(void) { return 7; }
