/* The one program of the test node's images. With no arguments, or
 * "pause": the pause container (holds the pod's namespaces, reaps what it is
 * given, exits on SIGTERM or SIGINT), as the sandbox and as upstream's
 * agnhost image runs by default. With "serve-hostname [--port=N]": agnhost's
 * serve-hostname over HTTP, answering every request with the hostname (the
 * pod's name), on port 9376 unless told. Any other argument is refused. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static int pause_forever(void)
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

static void stop(int sig)
{
	(void)sig;
	_exit(0);
}

/* Reads the request head (up to its blank line, 8 KiB, or 5 s of
 * silence), answers, and lets the client close first so that unread bytes
 * of its request do not reset the answer away. */
static void answer(int fd, const char *body)
{
	struct timeval wait = { .tv_sec = 5 };
	char buf[8192], head[256];
	size_t got = 0;
	ssize_t n;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
	while (got < sizeof(buf) - 1 &&
	       (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0) {
		got += (size_t)n;
		buf[got] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n", strlen(body));
	if (write(fd, head, (size_t)n) == n)
		(void)!write(fd, body, strlen(body));
	shutdown(fd, SHUT_WR);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static int serve_hostname(int port)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				    .sin_addr.s_addr = htonl(INADDR_ANY) };
	char name[256];
	int one = 1, s, fd;

	signal(SIGTERM, stop);
	signal(SIGINT, stop);
	signal(SIGPIPE, SIG_IGN);
	if (gethostname(name, sizeof(name)) != 0)
		return 1;
	name[sizeof(name) - 1] = '\0';
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&addr, sizeof(addr)) != 0 || listen(s, 64) != 0) {
		perror("serve-hostname");
		return 1;
	}
	fprintf(stderr, "serve-hostname: %s on port %d\n", name, port);
	for (;;) {
		fd = accept(s, NULL, NULL);
		if (fd < 0) {
			usleep(100000); /* out of descriptors: let others close */
			continue;
		}
		answer(fd, name);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	int port = 9376;

	if (argc < 2 || strcmp(argv[1], "pause") == 0)
		return pause_forever();
	if (strcmp(argv[1], "serve-hostname") == 0) {
		for (int i = 2; i < argc; i++) {
			if (strncmp(argv[i], "--port=", 7) == 0)
				port = atoi(argv[i] + 7);
		}
		if (port < 1 || port > 65535) {
			fprintf(stderr, "serve-hostname: bad port\n");
			return 2;
		}
		return serve_hostname(port);
	}
	fprintf(stderr, "%s: unknown subcommand %s (pause, serve-hostname)\n", argv[0], argv[1]);
	return 2;
}
