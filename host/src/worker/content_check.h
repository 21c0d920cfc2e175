// content_check.h - the cost model's content digest, checked without hashing.
//
// A candidate can edit the cost model in place (`TRN1.clock_ghz["tensor"] =
// 1e9`) before its own latency is computed in the same process, so every
// candidate process checks, after its call, that the modules under
// accelopt.sandbox.integrity.DIGESTED_PREFIXES still hash to their startup
// digest. Hashing them in Python costs ~1.5 ms per candidate (and writes
// reference counts, copying pages). This check reads the same places with
// CPython's borrowed-reference API instead: the worker (zygote) records once,
// through integrity.content_watch(), every mutable place the digest reads
// with the objects it held; a candidate process compares identities (and
// array bytes). When everything is the same object the digest cannot have
// changed; when anything differs (even an equal value that is a new object)
// the caller falls back to the digest (integrity.compare_digests), which
// decides. So the check never accepts what the digest would refuse.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace accelopt::worker {

/// The cost model's content as recorded in the worker (zygote).
class ContentSnapshot {
 public:
  /// Records integrity.content_watch()'s list. Holds strong references (no
  /// recorded address can be reused). Takes the GIL. Throws
  /// std::runtime_error when Python fails or a record is malformed.
  static std::shared_ptr<const ContentSnapshot> Take();

  /// True when every record still holds: same modules in sys.modules, same
  /// dict/list/set/class items by identity and in order, same function code,
  /// defaults and closure cells, same object classes, dicts and slot values,
  /// same array bytes. False only says something differs (or the watch holds
  /// a W_UNCHECKABLE record): integrity.compare_digests() decides. Writes no
  /// Python object except for the few W_ATTRIBUTE and W_ARRAY reads. Takes
  /// the GIL.
  bool Unchanged() const;

  /// Number of records (for logs and tests).
  size_t size() const;

  ~ContentSnapshot();

  struct Record;  ///< one recorded place (content_check.cc)

 private:
  std::vector<Record> records_;
  bool checkable_ = true;
};

}  // namespace accelopt::worker
