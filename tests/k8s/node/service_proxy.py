"""The cluster's `kubernetes` Service for pods on a test node, as kube-proxy
would give it: connections to LISTEN (the Service's ClusterIP and port,
an address of the host) are relayed to kube-apiserver on loopback.

    python3 service_proxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT
"""
import asyncio
import sys


async def relay(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def serve(target, reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_connection(*target)
    except OSError as e:
        print(f"service-proxy: cannot reach {target[0]}:{target[1]}: {e}", file=sys.stderr)
        writer.close()
        return
    await asyncio.gather(relay(reader, up_writer), relay(up_reader, writer))


async def main(listen_host, listen_port, target_host, target_port):
    target = (target_host, int(target_port))
    server = await asyncio.start_server(lambda r, w: serve(target, r, w),
                                        listen_host, int(listen_port))
    print(f"service-proxy: {listen_host}:{listen_port} -> {target_host}:{target_port}",
          flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
