# A Ruby workload whose CPU time is mostly in native callbacks into Ruby:
# libc's qsort called through FFI (JRuby: jffi, a JNI library) with a Ruby
# comparator, so samples land in Java code called from C (qsort) called
# from Java. Runs for SECONDS (default 15) of wall time.
# Run with: jruby ffi_callbacks.rb [SECONDS]
require 'ffi'

module LibC
  extend FFI::Library
  ffi_lib FFI::Library::LIBC
  callback :compare, [:pointer, :pointer], :int
  attach_function :qsort, [:pointer, :size_t, :size_t, :compare], :void
end

COMPARE = proc do |a, b|
  x = a.read_int32
  y = b.read_int32
  x <=> y
end

seconds = (ARGV[0] || "15").to_f
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
values = (0...2000).map { |i| (i * 2654435761) % 100_003 }
buffer = FFI::MemoryPointer.new(:int32, values.size)
rounds = 0
checksum = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  buffer.write_array_of_int32(values.rotate(rounds % values.size))
  LibC.qsort(buffer, values.size, 4, COMPARE)
  checksum = (checksum * 31 + buffer.get_int32(4 * (rounds % values.size))) & 0xFFFFFFFF
  rounds += 1
end
puts "rounds=#{rounds} checksum=#{checksum}"
