// Clang's thread-safety annotations (-Wthread-safety), spelled as macros that are empty
// under other compilers. GCC builds Aspen; tools/check_thread_safety.py re-parses the
// annotated translation units with clang and fails on any finding.
//
// What they say (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html):
//   GUARDED_BY(m)      this member is read and written only with m held
//   PT_GUARDED_BY(m)   what this pointer points to is used only with m held
//   REQUIRES(m...)     callers must hold m (a private helper called under the lock)
//   REQUIRES_SHARED(m) callers must hold m at least shared (reader side)
//   EXCLUDES(m...)     callers must not hold m (the function takes it itself)
//   ACQUIRE/RELEASE(m) the function takes/drops m and returns holding/not holding it;
//                      *_SHARED for the reader side of a reader/writer lock
//   CAPABILITY(name)   this class is a lock; SCOPED_CAPABILITY: an RAII holder of one
//   RETURN_CAPABILITY  the function returns (a reference to) this lock
//   NO_THREAD_SAFETY_ANALYSIS  the analysis skips the function. Only for code the
//                      analysis cannot follow, with a comment saying why; never to
//                      silence a finding.
// The analysis is static and per function: a lambda is a function of its own and does
// not inherit its caller's locks (it may carry REQUIRES(m) itself; util/mutex.h). It
// does not check constructors and destructors.
#pragma once

#if defined(__clang__)
#define ASPEN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ASPEN_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(name) ASPEN_THREAD_ANNOTATION(capability(name))
#define SCOPED_CAPABILITY ASPEN_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) ASPEN_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) ASPEN_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) ASPEN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) ASPEN_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) ASPEN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) ASPEN_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) ASPEN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) ASPEN_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) ASPEN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) ASPEN_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS ASPEN_THREAD_ANNOTATION(no_thread_safety_analysis)
