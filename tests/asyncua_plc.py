"""An OPC UA server of another implementation than the tests' own (Python's asyncua), the size
of a plant's PLC: COUNT Double variables `V00000`... under the folder `Plant`, none secured.

Usage: python3 asyncua_plc.py PORT COUNT

Prints `listening PORT NAMESPACE` once it serves. Reads commands on standard input, one a line:
`set BASE` sets every variable at once (variable i to BASE + i) and prints `set BASE` when
done. Ends when standard input closes.
"""

import asyncio
import sys

from asyncua import Server, ua


async def serve(port: int, count: int) -> None:
    server = Server()
    await server.init()
    server.set_endpoint(f"opc.tcp://127.0.0.1:{port}/plc")
    server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
    namespace = await server.register_namespace("urn:tserver-tests:asyncua-plc")
    plant = await server.nodes.objects.add_folder(ua.NodeId("Plant", namespace), "Plant")
    variables = []
    for index in range(count):
        name = f"V{index:05}"
        variables.append(await plant.add_variable(ua.NodeId(name, namespace), name, 0.0))
    async with server:
        print(f"listening {port} {namespace}", flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            words = line.decode().split()
            if len(words) == 2 and words[0] == "set":
                base = float(words[1])
                for index, variable in enumerate(variables):
                    value = ua.DataValue(ua.Variant(base + index, ua.VariantType.Double))
                    await server.write_attribute_value(variable.nodeid, value)
                print(f"set {words[1]}", flush=True)
            else:
                print(f"unknown command {line!r}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), int(sys.argv[2])))
