/* The pause container of the test node's pods: holds the namespaces, reaps
 * what it is given, and exits on SIGTERM or SIGINT. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			return 1;
		if (sig != SIGCHLD)
			return 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
