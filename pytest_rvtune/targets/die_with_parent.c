/* die_with_parent PARENT_PID COMMAND [ARGS...]   (COMMAND is a path: it is not looked up on PATH)
 *
 * Runs COMMAND as a child and makes COMMAND's whole process group die when the process PARENT_PID (the pytest
 * or rvtune process that started us) dies, even by SIGKILL, which leaves it no chance to clean up. Without this
 * a hung kernel's QEMU (or host ELF) was reparented to PID 1 and kept burning a core (issue 15).
 *
 * How: PR_SET_PDEATHSIG delivers SIGTERM to us when our parent dies; our handler SIGKILLs our process group,
 * which local.py made a session of its own, so it holds QEMU, perf, the shell under perf and the ELF (a
 * PDEATHSIG on the direct child alone would miss perf's child). PDEATHSIG fires when the parent *thread* that
 * forked us exits, not the parent process: local.py's run_process blocks in that same thread until the run
 * ends or is killed, so that thread only goes away with the whole process, which is exactly when we must die.
 * The getppid() check closes the race of a parent that died before prctl() took effect.
 *
 * Our exit status is the command's: its code, or its terminating signal re-raised on ourselves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void kill_group(int sig) {
  (void)sig;
  kill(0, SIGKILL); /* our own group: the command, everything it started, and us */
  _exit(128 + SIGKILL);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PARENT_PID COMMAND [ARGS...]\n", argv[0]);
    return 125;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = kill_group;
  sigaction(SIGTERM, &sa, NULL); /* before prctl: a death signal must never find the default action */
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != (pid_t)atol(argv[1])) kill_group(0);

  pid_t child = fork();
  if (child < 0) {
    fprintf(stderr, "cannot run %s: fork: %s\n", argv[2], strerror(errno));
    return 126;
  }
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    execv(argv[2], argv + 2); /* not execvp: it would hand a non-ELF file to /bin/sh */
    fprintf(stderr, "cannot run %s: %s\n", argv[2], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  int status;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return 125;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  int sig = WTERMSIG(status);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core); /* the command's crash, not ours: no second core file */
  signal(sig, SIG_DFL);
  kill(getpid(), sig);
  return 128 + sig;
}
