// The worker's C++ content check (host/src/worker/content_check.h): it must
// never accept an edit the cost model's content digest refuses.
#include <catch2/catch.hpp>

#include <string>

#include "python/interpreter.h"
#include "worker/content_check.h"

using accelopt::worker::ContentSnapshot;
namespace python = accelopt::python;

namespace {

// Loads the cost model as a worker does (accelopt.sandbox.worker_entry._start_emulator).
void ImportCostModel() {
  python::Exec(
      "import importlib, nki_emu\n"
      "for name in ('targets', 'formulas', 'metrics', 'residency', 'scheduler', 'tracer'):\n"
      "    importlib.import_module('nki_emu.cost.' + name)\n"
      "from accelopt.sandbox import integrity as _cc_integrity\n"
      "_cc_before = _cc_integrity.content_digests()\n");
}

// Runs `edit`, checks that the C++ check sees a difference and that the
// digest agrees, then runs `undo` and checks both are back to unchanged.
void ExpectSeen(const ContentSnapshot& snapshot, const std::string& edit, const std::string& undo) {
  INFO(edit);
  python::Exec(edit);
  CHECK_FALSE(snapshot.Unchanged());
  python::Exec("assert _cc_integrity.compare_digests(_cc_before), 'the digest missed the edit'\n");
  python::Exec(undo);
  CHECK(snapshot.Unchanged());
  python::Exec("assert _cc_integrity.compare_digests(_cc_before) == []\n");
}

}  // namespace

TEST_CASE("content check: unchanged cost model passes, in-place edits are seen", "[worker]") {
  ImportCostModel();
  auto snapshot = ContentSnapshot::Take();
  REQUIRE(snapshot->size() > 100);
  REQUIRE(snapshot->Unchanged());
  python::Exec("from nki_emu.cost import targets as _cc_t, scheduler as _cc_s\n");

  // A dict inside a dataclass object (the adversarial kernel adv_poison_cost.py does this).
  ExpectSeen(*snapshot, "_cc_saved = _cc_t.TRN1.clock_ghz['tensor']\n_cc_t.TRN1.clock_ghz['tensor'] = 1000.0\n",
             "_cc_t.TRN1.clock_ghz['tensor'] = _cc_saved\n");
  // A dataclass field replaced on the object.
  ExpectSeen(*snapshot,
             "import dataclasses\n_cc_f = dataclasses.fields(_cc_t.TRN1)[0].name\n"
             "_cc_saved = getattr(_cc_t.TRN1, _cc_f)\nobject.__setattr__(_cc_t.TRN1, _cc_f, 'x')\n",
             "object.__setattr__(_cc_t.TRN1, _cc_f, _cc_saved)\n");
  // A slot of a dataclass Field (a __slots__ object reached through the class).
  ExpectSeen(*snapshot,
             "_cc_field = type(_cc_t.TRN1).__dataclass_fields__[_cc_f]\n_cc_saved = _cc_field.repr\n"
             "_cc_field.repr = not _cc_saved\n",
             "_cc_field.repr = _cc_saved\n");
  // A function's keyword defaults.
  ExpectSeen(*snapshot,
             "import types\n_cc_fn = [v for v in vars(_cc_s).values() if isinstance(v, types.FunctionType) "
             "and v.__module__ == _cc_s.__name__][0]\n_cc_saved = _cc_fn.__kwdefaults__\n"
             "_cc_fn.__kwdefaults__ = {'injected': 1}\n",
             "_cc_fn.__kwdefaults__ = _cc_saved\n");
  // A class attribute added.
  ExpectSeen(*snapshot, "type(_cc_t.TRN1).injected = 1\n", "del type(_cc_t.TRN1).injected\n");
  // A module-level name rebound.
  ExpectSeen(*snapshot, "_cc_saved = _cc_t.TRN1\n_cc_t.TRN1 = None\n", "_cc_t.TRN1 = _cc_saved\n");
}

TEST_CASE("content check: a store through CPython's specialised bytecode is seen", "[worker]") {
  // `obj.value = x` in a hot loop runs CPython 3.11's adaptive STORE_ATTR, which may write
  // into the object's dict without PyDict_SetItem; the dict's version tag must still move
  // (dict_version.h).
  python::Exec("from nki_emu.cost import targets as _cc_t\n"
               "class _CcProbe:\n    pass\n"
               "_cc_t._cc_probe = _CcProbe()\n_cc_t._cc_probe.value = 1\n");
  ImportCostModel();  // digest taken with the probe in place
  auto snapshot = ContentSnapshot::Take();
  REQUIRE(snapshot->Unchanged());
  python::Exec("def _cc_store(obj, value):\n    for _ in range(64):\n        obj.value = value\n"
               "_cc_store(_cc_t._cc_probe, 2)\n");
  CHECK_FALSE(snapshot->Unchanged());
  python::Exec("assert _cc_integrity.compare_digests(_cc_before)\n_cc_store(_cc_t._cc_probe, 1)\n");
  CHECK(snapshot->Unchanged());
  python::Exec("del _cc_t._cc_probe\n");
}

TEST_CASE("content check: an equal value in a new object is left to the digest", "[worker]") {
  ImportCostModel();
  auto snapshot = ContentSnapshot::Take();
  python::Exec("from nki_emu.cost import targets as _cc_t\n"
               "_cc_saved = _cc_t.TRN1.clock_ghz['tensor']\n"
               "_cc_t.TRN1.clock_ghz['tensor'] = float(repr(_cc_saved))\n");
  CHECK_FALSE(snapshot->Unchanged());  // not the same object: the C++ check cannot tell
  python::Exec("assert _cc_integrity.compare_digests(_cc_before) == []\n");  // the digest decides: unchanged
  python::Exec("_cc_t.TRN1.clock_ghz['tensor'] = _cc_saved\n");
  CHECK(snapshot->Unchanged());
}

TEST_CASE("content check: running a kernel leaves the cost model unchanged", "[worker]") {
  ImportCostModel();
  python::Exec("import nki_emu\nnki_emu.install()\n");  // the warm-up kernel imports neuronxcc.nki
  // warm_up returns the kernel's error kind, None when it ran (caches filled now, as in a worker).
  REQUIRE(python::CallJson("accelopt.sandbox.worker_entry", "warm_up", nullptr).is_null());
  auto snapshot = ContentSnapshot::Take();
  REQUIRE(python::CallJson("accelopt.sandbox.worker_entry", "warm_up", nullptr).is_null());
  CHECK(snapshot->Unchanged());
}
