// run_dir.h - the directory that holds everything one run produced.
//
//   runs/<UTC yyyymmdd-HHMMSS>-<pipeline name>/
//     pipeline.resolved.yaml   the pipeline after --set overrides
//     run.json                 versions, argv, status, timings
//     stages/<NN>-<id>/...     inputs.json, outputs.json, status.json, log.txt
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace accelopt {

/// Creates `base`/`relative`, one component at a time (mkdirat, then
/// openat with O_NOFOLLOW | O_DIRECTORY), so that nothing below `base` can
/// redirect it: a component that is a symlink, or exists and is not a
/// directory, is refused. Missing components are created with `mode`
/// (default 0700: private). `base` itself is trusted and may be reached
/// through symlinks. `relative` must be relative, without "..".
/// Returns base/relative. Throws std::runtime_error naming the component,
/// e.g. "<run>/workers: refusing a symlink (the host never follows symlinks
/// inside a run directory)".
std::filesystem::path EnsurePrivateDir(const std::filesystem::path& base, const std::filesystem::path& relative,
                                       unsigned mode = 0700);

/// The same for one directory whose parent is trusted: creates `path` (mode
/// 0700) if missing; refuses it if it is a symlink or not a directory.
/// This is the call for a worker's scratch `<run_dir>/workers/w<k>` once
/// `<run_dir>/workers` was made with EnsurePrivateDir(run_dir, "workers").
/// Throws std::runtime_error.
std::filesystem::path EnsurePrivateDir(const std::filesystem::path& path);

/// Opens `base`/`relative` for appending (created 0644 if missing) with the
/// same guarantees as EnsurePrivateDir for its folders, and O_NOFOLLOW for
/// the file itself. Returns the file descriptor (the caller closes it).
/// Throws std::runtime_error.
int OpenForAppendNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative);

/// Appends `text` to `base`/`relative` in one write (OpenForAppendNoFollow).
/// Throws std::runtime_error.
void AppendNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text);

/// Writes `text` to `base`/`relative` atomically (temporary file created
/// with O_EXCL | O_NOFOLLOW, fsync, rename) without following symlinks
/// below `base`; a symlink at the destination is replaced, never written
/// through. Creates folders as EnsurePrivateDir(base, ..., 0755).
/// Throws std::runtime_error.
void WriteFileNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative, std::string_view text);

/// Removes `base`/`relative` (a file, a symlink or a whole folder) without
/// following a symlink anywhere below `base`: folders are walked with
/// openat(O_NOFOLLOW) and a symlink is unlinked itself, never its target; a
/// symlinked folder on the way to `relative` is refused. Returns false when
/// nothing was there. Throws std::runtime_error naming the path.
bool RemoveNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative);

/// Opens the regular file `base`/`relative` for reading without following a
/// symlink below `base` and without blocking on a FIFO (O_NONBLOCK, fstat
/// S_ISREG). Returns the descriptor (the caller closes it), or -1 when the
/// file or one of its folders is missing. Throws std::runtime_error.
int OpenForReadNoFollow(const std::filesystem::path& base, const std::filesystem::path& relative);

class RunDirectory {
 public:
  /// Uses `explicit_dir` if non-empty (created if needed), else makes
  /// `<base>/<timestamp>-<name>` (a numeric suffix avoids collisions).
  /// The run directory itself must not be a symlink (refused), and must be a
  /// directory. Throws std::runtime_error if it cannot be created.
  static RunDirectory Create(const std::filesystem::path& explicit_dir, const std::string& name,
                             const std::filesystem::path& base = "runs");

  const std::filesystem::path& path() const { return path_; }

  /// Atomically writes `relative` (temp file + rename); creates folders.
  /// `relative` may also be an absolute path below path(). Nothing below
  /// path() is followed if it is a symlink (WriteFileNoFollow). Throws
  /// std::runtime_error.
  void WriteText(const std::filesystem::path& relative, std::string_view text) const;
  void WriteJson(const std::filesystem::path& relative, const nlohmann::json& value) const;

  /// Creates the folder `relative` (or an absolute path below path()) with
  /// mode 0755, refusing symlinks below path() (EnsurePrivateDir). Returns
  /// the absolute path. Throws std::runtime_error.
  std::filesystem::path EnsureDir(const std::filesystem::path& relative) const;

  /// `relative` (or an absolute path below path()) as a path relative to
  /// path(). Throws std::runtime_error if it is outside.
  std::filesystem::path Relative(const std::filesystem::path& path) const;

 private:
  explicit RunDirectory(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

/// Current UTC time as ISO-8601 ("2026-11-22T10:15:30Z").
std::string UtcNowIso();

}  // namespace accelopt
